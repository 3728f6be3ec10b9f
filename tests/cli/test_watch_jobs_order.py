"""The narrator (scripts/watch_jobs.py) prints several jobs' events in time order, and a
job's events that share a timestamp in the order they happened."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from tests.conftest import REPO


def _narrator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("watch_jobs", REPO / "scripts" / "watch_jobs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_events_sharing_a_millisecond_keep_their_order() -> None:
    at = "2026-11-29T10:03:40.123Z"
    events = [
        ("2026-11-29T10:03:41.000Z", "elastic resized"),
        (at, "newcomer PENDING: submitted"),
        (at, "newcomer PENDING -> ADMITTED"),
        (at, "newcomer ADMITTED -> RUNNING"),
        ("2026-11-29T10:03:39.999Z", "elastic ADMITTED -> RUNNING"),
    ]
    assert _narrator().in_time_order(events) == [
        "elastic ADMITTED -> RUNNING",
        "newcomer PENDING: submitted",
        "newcomer PENDING -> ADMITTED",
        "newcomer ADMITTED -> RUNNING",
        "elastic resized",
    ]


def test_a_job_decision_stamped_before_its_submission_still_prints_after_it() -> None:
    narrator = _narrator()
    events = [
        {"at": "2026-11-29T10:03:40.500Z", "to_state": "PENDING"},
        {"at": "2026-11-29T10:03:40.100Z", "to_state": "ADMITTED"},
        {"at": "2026-11-29T10:03:41.000Z", "to_state": "RUNNING"},
    ]
    stamps = narrator.job_ordered(events)
    other = ("2026-11-29T10:03:40.300Z", "elastic resized")
    merged = [other, *zip(stamps, ["submitted", "admitted", "running"], strict=True)]
    assert narrator.in_time_order(merged) == ["elastic resized", "submitted", "admitted", "running"]
