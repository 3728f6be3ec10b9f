"""Reliability against real server processes: crashes mid-round, restarts, concurrent
clients retrying with the same idempotency keys, preemptions that must not spend retries."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import defaultdict

import httpx
import pytest

from tests.conftest import ServerProcess, StartServer

pytestmark = pytest.mark.integration
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


def client_for(server: ServerProcess) -> httpx.Client:
    headers = {"Authorization": f"Bearer {server.admin_token}"}
    return httpx.Client(base_url=server.url, headers=headers, timeout=30)


def all_jobs(client: httpx.Client) -> list[dict[str, object]]:
    return list(client.get("/api/v1/jobs?limit=1000").json()["items"])


def wait_all_terminal(client: httpx.Client, timeout: float) -> list[dict[str, object]]:
    deadline = time.monotonic() + timeout
    while True:
        jobs = all_jobs(client)
        if all(job["state"] in TERMINAL for job in jobs):
            return jobs
        assert time.monotonic() < deadline, [(j["name"], j["state"]) for j in jobs]
        time.sleep(0.2)


def crash_and_restart(server: ServerProcess, kills: int, seed: int) -> None:
    """SIGKILL the service while jobs run (mid-round: rounds are every 0.2 s), restart it,
    and check no job is lost or duplicated and all finish without spending retries."""
    rng = random.Random(seed)
    with client_for(server) as client:
        submitted = set()
        for index in range(5):
            spec = {"name": f"j{index}", "model": "mlp", "workers": 1 + index % 2, "iterations": 20}
            response = client.post("/api/v1/jobs", json=spec)
            assert response.status_code == 201
            submitted.add(response.json()["id"])
    for _ in range(kills):
        time.sleep(rng.uniform(0.5, 1.5))
        server.restart()  # SIGKILL, then start again on the same database
    with client_for(server) as client:
        jobs = wait_all_terminal(client, timeout=120)
    assert {job["id"] for job in jobs} == submitted  # none lost, none duplicated
    assert {job["state"] for job in jobs} == {"SUCCEEDED"}
    # JIGSAW_MAX_FAILURES=0: a charged restart would have failed the job.
    assert all(job["failures"] == 0 for job in jobs)


def test_a_crash_mid_round_loses_nothing_on_sqlite(start_server: StartServer) -> None:
    crash_and_restart(start_server(max_failures=0), kills=1, seed=1)


@pytest.mark.slow
@pytest.mark.postgres
def test_repeated_crashes_lose_nothing_on_postgres(
    start_server: StartServer, postgres_url: str
) -> None:
    crash_and_restart(start_server(postgres_url, max_failures=0), kills=3, seed=2)


def test_preemption_does_not_spend_the_retry_budget(start_server: StartServer) -> None:
    server = start_server(
        policy="maxmin", policy_options=json.dumps({"min_run_s": 0.5}), max_failures=0, gpus=4
    )
    with client_for(server) as client:
        long = client.post(
            "/api/v1/jobs", json={"name": "long", "model": "mlp", "workers": 4, "iterations": 60}
        ).json()
        deadline = time.monotonic() + 30
        while client.get(f"/api/v1/jobs/{long['id']}").json()["state"] != "RUNNING":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(1.0)
        short = {"name": "short", "model": "mlp", "workers": 4, "iterations": 5}
        assert client.post("/api/v1/jobs", json=short).is_success
        jobs = {job["name"]: job for job in wait_all_terminal(client, timeout=60)}
        events = client.get(f"/api/v1/jobs/{long['id']}/events").json()["items"]
    assert jobs["long"]["state"] == jobs["short"]["state"] == "SUCCEEDED"
    assert jobs["long"]["preemptions"] >= 1 and jobs["long"]["failures"] == 0
    assert "PREEMPTED" in [event["to_state"] for event in events]
    assert jobs["long"]["preempted_by"] == jobs["short"]["id"]


@pytest.mark.slow
@pytest.mark.postgres
def test_concurrent_clients_retrying_with_keys_create_each_job_once(
    start_server: StartServer, postgres_url: str
) -> None:
    """20 clients x 100 submissions; a quarter are retried at once with the same key, and
    every client also replays 10 of its neighbour's keys while they may be in flight."""
    server = start_server(postgres_url, round_seconds=1.0)
    clients, per_client = 20, 100
    bodies: dict[str, set[bytes]] = defaultdict(set)
    statuses: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def send(http: httpx.Client, key: str) -> None:
        spec = {"name": key, "model": "mlp", "workers": 1, "iterations": 10**6}
        for _ in range(200):
            response = http.post("/api/v1/jobs", json=spec, headers={"Idempotency-Key": key})
            with lock:
                statuses.append(response.status_code)
            if response.status_code != 409:
                with lock:
                    bodies[key].add(response.content)
                return
            time.sleep(0.01)
        raise AssertionError(f"key {key} stayed in flight")

    def work(index: int) -> None:
        rng = random.Random(index)
        mine = [f"c{index}-{n}" for n in range(per_client)]
        theirs = [f"c{(index + 1) % clients}-{n}" for n in range(0, per_client, 10)]
        with client_for(server) as http:
            barrier.wait()
            for number, key in enumerate(mine):
                send(http, key)
                if rng.random() < 0.25:
                    send(http, key)
                if number % 10 == 0:
                    send(http, theirs[number // 10])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(status < 500 for status in statuses), sorted(set(statuses))
    assert set(statuses) <= {201, 409}
    assert len(bodies) == clients * per_client
    assert all(len(variants) == 1 for variants in bodies.values())  # replays identical
    ids = {json.loads(next(iter(v)))["id"] for v in bodies.values()}
    with client_for(server) as http:
        listed = http.get("/api/v1/jobs?limit=1&state=PENDING&state=ADMITTED&state=RUNNING")
        total = http.get("/api/v1/jobs?limit=1").json()["total"]
    assert listed.status_code == 200
    assert total == len(ids) == clients * per_client
