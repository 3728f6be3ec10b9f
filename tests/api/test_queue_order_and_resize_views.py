"""The queue in the policy's order, a waiting job's place on every job view, and why an elastic
job keeps its size (issue 30, items 2-4). The app runs on SQLite with real scheduling rounds."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from api.queue_estimate import estimate_queue
from api.queue_order import queue_order
from api.resize_view import resize_story
from api.scheduler.recorder import RoundRecorder
from api.scheduler.service import build_policy
from api.store import SqlStore
from jigsaw.model.cluster import Cluster
from jigsaw.model.domain import Job, JobEvent, JobSpec
from jigsaw.model.lifecycle import JobState
from jigsaw.model.reasons import ReasonCode
from jigsaw.scheduling.clock import WallClock
from jigsaw.scheduling.cycle import SchedulingCycle
from jigsaw.simulator.rate_executor import ConstantRate, RateDrivenExecutor
from tests.api.conftest import ApiClient, make_api

NOW = 1_800_000_000.0


def run_round(api: ApiClient, cluster: Cluster) -> None:
    """One real round of the app's configured policy, recorded as the leader records it."""
    with api.state.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE scheduler_leader SET epoch = 1")
    store = SqlStore(api.state.engine, epoch=1)
    policy = api.state.settings.policy
    recorder = RoundRecorder(api.state.engine, api.state.metrics, 1, policy)
    cycle = SchedulingCycle(
        store,
        RateDrivenExecutor(ConstantRate(10.0)),
        build_policy(api.state.settings, api.state.oracle),
        WallClock(),
        lambda: cluster,
        on_decision=lambda now, d: recorder.on_decision(store, now, d),
    )
    recorder.after_round(cycle.run_once(), cluster)


def job(name: str, *, at: float, priority: int = 0, workers: int = 1, **changes: Any) -> Job:
    spec = JobSpec(name=name, model="mlp", workers=workers, iterations=100, priority=priority)
    return Job(f"j-{name}", spec, at, **changes)


def test_las_and_jigsaw_queue_by_priority_first_fifo_by_arrival() -> None:
    early = job("early", at=NOW - 30)
    later = job("later", at=NOW - 20)
    urgent = job("urgent", at=NOW - 10, priority=100)
    active = [later, urgent, early]
    for policy in ("las", "jigsaw", "timeslice"):
        order = queue_order(policy, {})
        assert [j.spec.name for j in order.waiting(active, NOW, 4)] == [
            "urgent",
            "early",
            "later",
        ], policy
        assert "priority" in order.words
    fifo = queue_order("fifo", {})
    assert [j.spec.name for j in fifo.waiting(active, NOW, 4)] == ["early", "later", "urgent"]
    assert fifo.words == "fifo: arrival order (priority is not used)"
    # timeslice on the max-min base: most owed per unit of share first, the longest wait here.
    maxmin = queue_order("timeslice", {"config": {"base": "maxmin"}})
    assert [j.spec.name for j in maxmin.waiting(active, NOW, 1)] == ["early", "later", "urgent"]
    assert "max-min" in maxmin.words


def test_the_estimate_follows_the_order_it_is_given() -> None:
    hog = job("hog", at=NOW - 60, workers=2, state=JobState.RUNNING, placement=((0, 0), (0, 1)))
    first, second = job("first", at=NOW - 1, workers=2), job("second", at=NOW - 2, workers=2)
    estimates = estimate_queue([hog], [first, second], 2, NOW, lambda _job: 10.0)
    # The hog frees both GPUs after its 100 iterations at 10/s; first runs 10 s, then second.
    assert [(e.job.spec.name, e.start_at) for e in estimates] == [
        ("first", NOW + 10),
        ("second", NOW + 20),
    ]


def test_a_waiting_job_carries_the_queues_words_on_every_job_view(
    sqlite_url: str, tmp_path: Path
) -> None:
    api = make_api(sqlite_url, tmp_path, gpus=4, policy="las")
    with api.client:
        hog = api.submit(name="hog", model="mlp", workers=4, iterations=10**6, priority=1000)
        run_round(api, Cluster.uniform(4, 4))
        late = api.submit(name="late", model="mlp", workers=1, iterations=10)
        urgent = api.submit(name="urgent", model="mlp", workers=1, iterations=10, priority=9)
        headers = api.headers("alice")
        queue = api.client.get("/api/v1/scheduler/queue", headers=headers).json()
        assert [item["name"] for item in queue["items"]] == ["urgent", "late"]
        assert queue["order"].startswith("las: priority")
        entries = {item["job_id"]: settled(item) for item in queue["items"]}
        assert entries[late["id"]]["reason"] == "needs 1 GPU, 0 free, behind urgent (#1)"
        for submitted in (late, urgent):
            shown = api.client.get(f"/api/v1/jobs/{submitted['id']}", headers=headers).json()
            assert settled(shown["waiting"]) == entries[submitted["id"]]
            assert shown["waiting"]["estimated_wait_s"] > 0
        listed = api.client.get("/api/v1/jobs?state=PENDING", headers=headers).json()["items"]
        assert {j["id"]: settled(j["waiting"]) for j in listed} == entries
        running = api.client.get(f"/api/v1/jobs/{hog['id']}", headers=headers).json()
        assert running["waiting"] is None and running["resizing"] is None
    api.state.engine.dispose()


def settled(entry: dict[str, Any]) -> dict[str, Any]:
    """A queue entry without its estimates (they count from the moment of each request)."""
    return {key: value for key, value in entry.items() if not key.startswith("estimated")}


# -- why an elastic job keeps its size (api/resize_view.py) ----------------------------------


def elastic(size: int, **changes: Any) -> Job:
    spec = JobSpec(
        name="e",
        model="mlp",
        workers=2,
        iterations=1000,
        batch_size=24,
        min_workers=1,
        max_workers=4,
    )
    placement = tuple((0, g) for g in range(size))
    return Job("j-e", spec, NOW - 600, JobState.RUNNING, placement=placement, **changes)


def story(job: Job, policy: str = "jigsaw", **given: Any) -> list[str]:
    said = resize_story(
        job,
        policy=policy,
        options=given.pop("options", {}),
        events=given.pop("events", []),
        last_decisions=given.pop("last_decisions", []),
        free_gpus=given.pop("free_gpus", 0),
        waiting_jobs=given.pop("waiting_jobs", 0),
        rate=given.pop("rate", None),
        now=NOW,
    )
    assert said is not None
    return said


STORIES = [
    ("fifo never resizes", elastic(2), {"policy": "fifo"},
     "the policy fifo does not resize jobs"),
    ("the oracle-only ablation", elastic(2), {"options": {"config": {"knowledge": "oracle"}}},
     "the policy jigsaw does not resize jobs"),
    ("no idle GPUs", elastic(2), {}, "no idle GPUs to grow into (at 2 of up to 4 workers)"),
    ("at max", elastic(4), {"free_gpus": 2}, "at its max_workers (4) and nobody waits"),
    ("held", elastic(2, resized_at=NOW - 10), {"options": {"config": {"min_hold_s": 60}}},
     "held until 08:00:50Z: min_hold_s is 60 s"),
    ("a measured restart", elastic(2, resize_s=14.0, resizes=2), {"free_gpus": 2},
     "2 idle GPUs: jigsaw sizes it each round by goodput from the step times its leases "
     "measured (at most twice the largest size measured); a change pays its restart (its last "
     "resize took 14 s), discounted by its age and its 2 resizes so far"),
    ("the prior before a measure", elastic(2), {"free_gpus": 1},
     "a change pays its restart (30 s before one is measured)"),
    ("someone waits", elastic(3), {"waiting_jobs": 2},
     "2 jobs wait: it shrinks towards 1 worker when the round's objective says their running "
     "is worth more than its speed"),
    ("at min while waiting", elastic(1), {"waiting_jobs": 1},
     "at its min_workers (1) while 1 job waits"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "job", "given", "says"), STORIES, ids=[s[0] for s in STORIES])
def test_why_an_elastic_job_keeps_its_size(
    case: str, job: Job, given: dict[str, Any], says: str
) -> None:
    policy = given.pop("policy", "jigsaw")
    assert any(says in phrase for phrase in story(job, policy, **dict(given))), case


def test_the_last_resize_and_the_rounds_decision_are_quoted() -> None:
    resized = JobEvent(
        "j-e",
        JobState.RUNNING,
        JobState.RUNNING,
        "grow 2->4: saves 30 s for a 14 s restart",
        NOW - 100,
        "scheduler",
        ReasonCode.RESIZED,
    )
    said = story(
        elastic(4),
        events=[resized],
        last_decisions=[{"kind": "resize", "job_id": "j-e", "reason": "grow 2->4: saves 30 s"}],
    )
    assert said[0] == (
        "last resize (Running/Resized) at 07:58:20Z: grow 2->4: saves 30 s for a 14 s restart"
    )
    assert said[1] == "the last round resized it: grow 2->4: saves 30 s"


def test_a_fixed_size_job_has_no_story_and_a_waiting_one_is_told_when() -> None:
    fixed = job("f", at=NOW)
    assert (
        resize_story(
            fixed,
            policy="jigsaw",
            options={},
            events=[],
            last_decisions=[],
            free_gpus=4,
            waiting_jobs=0,
            rate=None,
            now=time.time(),
        )
        is None
    )
    pending = Job("j-p", elastic(2).spec, NOW)
    assert story(pending) == ["resized only while it runs; it starts at 2 workers"]
