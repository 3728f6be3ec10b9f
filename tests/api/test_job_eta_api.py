"""Online eta as the API shows it: stored with the job, answered per candidate plan with its
source, on SQLite and Postgres."""

from __future__ import annotations

from dataclasses import replace

from jigsaw.model.block_noise import BlockNoise
from jigsaw.model.plan import SPBPlan
from tests.api.conftest import ApiClient


def stats(observations: int) -> tuple[BlockNoise, ...]:
    return tuple(
        BlockNoise(b, grad_sqr=0.2, grad_var=5.0 * b, batch=32, observations=observations,
                   last_iteration=40, contributors=4)
        for b in range(1, 5)
    )  # fmt: skip


def test_a_job_shows_its_eta_per_plan_with_the_source(any_api: ApiClient) -> None:
    submitted = any_api.submit(model="digits_cnn", workers=4, spb="auto")
    eta = submitted["eta"]
    assert isinstance(eta, dict) and eta["current"] is None  # no plan yet
    labels = {c["plan"]: c for c in eta["candidates"]}
    assert labels["none"]["eta"] == 1.0 and labels["none"]["source"] == "full backprop"
    assert labels["staircase"]["source"] in ("measured table", "default")

    store = any_api.state.store
    job = store.get(str(submitted["id"]))
    store.save(
        replace(job, block_noise=stats(20), plan=SPBPlan((0, 1, 2, 3), 4)),
        expected_version=job.version,
    )
    assert store.get(job.id).block_noise == stats(20)  # the codec round-trips it
    shown = any_api.client.get(f"/api/v1/jobs/{job.id}", headers=any_api.headers("alice")).json()
    eta = shown["eta"]
    assert eta["current"]["source"] == "online" and eta["current"]["depths"] == [0, 1, 2, 3]
    assert 0.25 <= eta["current"]["eta"] < 1.0
    online = {c["plan"]: c for c in eta["candidates"]}
    assert online["uniform:3"]["eta"] < online["uniform:1"]["eta"] <= 1.0
    assert eta["blocks_measured"] == 4 and eta["fewest_observations"] == 20
    listed = any_api.client.get("/api/v1/jobs", headers=any_api.headers("alice")).json()
    assert listed["items"][0]["eta"]["current"]["source"] == "online"
