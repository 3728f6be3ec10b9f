"""Elastic submissions (min_workers, max_workers, batch_policy, global-batch bounds) through the
API on SQLite and Postgres: every bad request is refused at submit with 422 naming the field,
a good one shows its size in the job JSON, and a job without the fields looks as it always did."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.conftest import ApiClient, make_api

GPUS = 8
QUEUE_QUOTA = 4
BASE = {"name": "e", "model": "mlp", "workers": 2, "iterations": 10, "batch_size": 12}
ADAPTIVE = {"batch_policy": "adaptive", "min_global_batch": 12, "max_global_batch": 96}

REFUSED = [
    # (what is wrong, the body's changes, the field named, words the message must hold)
    ("min above max", {"min_workers": 3, "max_workers": 2}, "min_workers", "above max_workers"),
    ("workers below min", {"min_workers": 3, "max_workers": 4}, "workers", "must lie in"),
    ("workers above max", {"workers": 4, "max_workers": 3}, "workers", "must lie in"),
    ("max over the cluster", {**ADAPTIVE, "max_workers": GPUS + 1}, "max_workers", f"{GPUS} GPUs"),
    (
        "max over the queue quota",
        {**ADAPTIVE, "max_workers": 6, "queue": "small"},
        "max_workers",
        "quota",
    ),
    (
        "uneven fixed batch",
        {"max_workers": 5},
        "batch_size",
        "does not split evenly over 5 workers",
    ),
    ("adaptive without bounds", {"batch_policy": "adaptive"}, "min_global_batch", "needs"),
    (
        "adaptive bounds miss the initial batch",
        {"batch_policy": "adaptive", "min_global_batch": 32, "max_global_batch": 64},
        "batch_size",
        "must lie in min_global_batch",
    ),
    (
        # Issue 30 item 8: no batch_size can fix inverted bounds; the bounds are named.
        "inverted adaptive bounds",
        {"batch_policy": "adaptive", "min_global_batch": 192, "max_global_batch": 24},
        "min_global_batch",
        "min_global_batch (192) is above max_global_batch (24)",
    ),
    (
        # Issue 30 item 9: at 3 or 4 workers no global batch in 1..2 gives each a sample.
        "adaptive bounds some size can never use",
        {
            "batch_size": 1,
            "min_workers": 1,
            "max_workers": 4,
            "batch_policy": "adaptive",
            "min_global_batch": 1,
            "max_global_batch": 2,
        },
        "max_global_batch",
        "at 3, 4 worker(s) no global batch in min_global_batch..max_global_batch (1..2) gives "
        "every worker the same whole number of samples; raise max_global_batch to 4, or "
        "max_workers to 2",
    ),
    (
        "bounds under a fixed batch",
        {"max_workers": 4, "min_global_batch": 8},
        "min_global_batch",
        "adaptive",
    ),
    ("unknown batch policy", {"batch_policy": "elastic"}, "batch_policy", ""),
    ("elastic pipeline", {"max_workers": 4, "parallelism": "pipeline"}, "max_workers", "data"),
    (
        "adaptive hybrid",
        {
            "batch_policy": "adaptive",
            "parallelism": "hybrid",
            "min_global_batch": 12,
            "max_global_batch": 48,
        },
        "batch_policy",
        "data",
    ),
    ("max_workers zero", {"max_workers": 0}, "max_workers", ""),
]


@pytest.fixture
def api(database_url: str, tmp_path: object) -> Iterator[ApiClient]:
    made = make_api(database_url, tmp_path, gpus=GPUS, queue_quotas={"small": QUEUE_QUOTA})
    with made.client:
        yield made
    made.state.engine.dispose()


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_bad_elastic_requests_are_refused_naming_the_field(
    api: ApiClient, changes: dict[str, object], field: str, words: str
) -> None:
    body = {**BASE, **changes}
    for path in ("/api/v1/jobs", "/api/v1/jobs:validate"):
        response = api.client.post(path, json=body, headers=api.headers("alice"))
        assert response.status_code == 422, response.text
        assert response.json()["field"] == field, response.text
        assert words in response.json()["detail"]
    assert api.client.get("/api/v1/jobs", headers=api.headers("alice")).json()["total"] == 0


def test_an_elastic_job_shows_its_size_and_range(api: ApiClient) -> None:
    job = api.submit(**{**BASE, "min_workers": 1, "max_workers": 4, "workers": 3, "batch_size": 4})
    spec = job["spec"]
    assert isinstance(spec, dict)
    assert (spec["min_workers"], spec["max_workers"], spec["batch_policy"]) == (1, 4, "fixed")
    assert job["current_workers"] is None  # holds no GPUs yet
    assert (job["worker_batch"], job["global_batch"]) == (4, 12)
    adaptive = api.submit(
        **{**BASE, "batch_policy": "adaptive", "min_global_batch": 8, "max_global_batch": 96}
    )
    assert isinstance(adaptive["spec"], dict)
    assert adaptive["spec"]["max_global_batch"] == 96
    fetched = api.client.get(f"/api/v1/jobs/{job['id']}", headers=api.headers("alice")).json()
    assert fetched["spec"] == spec


def test_a_job_without_elastic_fields_is_as_before(api: ApiClient) -> None:
    job = api.submit(**BASE)
    spec = job["spec"]
    assert isinstance(spec, dict)
    assert (spec["min_workers"], spec["max_workers"], spec["batch_policy"]) == (None, None, "fixed")
    assert (job["worker_batch"], job["global_batch"]) == (12, 24)
    # max_workers over the quota matters only for elastic jobs; workers within it still pass
    api.submit(**{**BASE, "queue": "small"})
