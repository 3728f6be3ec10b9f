"""GPU quotas per queue and per user, enforced at admission (and at submission for jobs that
could never fit)."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.lifecycle import JobState
from jigsaw.model.snapshot import Snapshot
from jigsaw.planning.planner import Planner
from jigsaw.policies import create_policy
from jigsaw.policies.quota import QuotaPolicy, Quotas
from tests.api.conftest import make_api
from tests.conftest import StartServer


def job(job_id: str, workers: int, *, queue: str = "default", user: str = "u", **kw) -> Job:
    spec = JobSpec(name=job_id, model="mlp", workers=workers, iterations=10, queue=queue, user=user)
    return Job(id=job_id, spec=spec, submitted_at=float(len(job_id)), **kw)


def started(policy: QuotaPolicy, jobs: list[Job]) -> list[str]:
    snapshot = Snapshot.build(100.0, Cluster.uniform(8, 4), jobs)
    return [d.job_id for d in policy.decide(snapshot) if isinstance(d, Start)]


def test_a_queue_at_its_quota_waits_while_other_queues_start() -> None:
    policy = QuotaPolicy(create_policy("fifo", planner=Planner()), Quotas({"q": 3}, {}))
    running = job("r", 2, queue="q", state=JobState.RUNNING, placement=((0, 0), (0, 1)))
    assert started(policy, [running, job("qq", 2, queue="q"), job("ddd", 2)]) == ["ddd"]


def test_starts_of_one_round_count_together() -> None:
    policy = QuotaPolicy(create_policy("fifo", planner=Planner()), Quotas({}, {"alice": 2}))
    jobs = [job("a", 2, user="alice"), job("bb", 2, user="alice"), job("ccc", 2, user="bob")]
    assert started(policy, jobs) == ["a", "ccc"]


def test_without_quotas_the_policy_is_unchanged() -> None:
    policy = QuotaPolicy(create_policy("fifo", planner=Planner()), Quotas({}, {}))
    assert started(policy, [job("a", 2), job("bb", 2)]) == ["a", "bb"]


def test_a_job_larger_than_its_quota_is_refused_at_submission(
    sqlite_url: str, tmp_path: object
) -> None:
    api = make_api(sqlite_url, tmp_path, queue_quotas={"small": 2})
    with api.client:
        body = {"name": "x", "model": "mlp", "workers": 3, "iterations": 5, "queue": "small"}
        response = api.client.post("/api/v1/jobs", json=body, headers=api.headers("alice"))
        assert response.status_code == 422 and response.json()["field"] == "workers"
        assert "quota" in response.json()["detail"]
        body["queue"] = "default"
        assert api.client.post("/api/v1/jobs", json=body, headers=api.headers("alice")).is_success
    api.state.engine.dispose()


@pytest.mark.integration
def test_the_service_never_runs_a_queue_over_its_quota(start_server: StartServer) -> None:
    server = start_server(gpus=4, queue_quotas=json.dumps({"small": 2}))
    headers = {"Authorization": f"Bearer {server.admin_token}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=10) as client:
        for index in range(3):
            spec = {"name": f"s{index}", "model": "mlp", "workers": 2, "iterations": 10}
            assert client.post("/api/v1/jobs", json={**spec, "queue": "small"}).is_success
        big = {"name": "other", "model": "mlp", "workers": 2, "iterations": 10}
        assert client.post("/api/v1/jobs", json=big).is_success
        deadline, most, other_overlapped = time.monotonic() + 60, 0, False
        while True:
            jobs = client.get("/api/v1/jobs").json()["items"]
            holding = [j for j in jobs if j["state"] in ("ADMITTED", "RUNNING")]
            most = max(most, sum(len(j["placement"]) for j in holding if j["queue"] == "small"))
            other_overlapped |= len(holding) == 2
            if all(j["state"] == "SUCCEEDED" for j in jobs):
                break
            assert time.monotonic() < deadline, jobs
            time.sleep(0.05)
    assert most == 2
    assert other_overlapped  # the other queue ran next to the small one
