"""The compose topology as real processes: Postgres (a fresh database on the running server),
a Ray head, two Ray worker nodes with logical GPUs, and ``jigsaw-cli serve`` with the Ray
executor and the LAS policy. Three jobs submitted with ``jigsaw-cli``: a higher-priority job
preempts a lower one, which later resumes from its checkpoint; the gang workers running
then are SIGKILLed mid-iteration. Every job must reach SUCCEEDED with falling losses.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.runtime.local_cluster import REPO, LocalRayCluster, ServerProcess, base_env

pytestmark = [
    pytest.mark.slow,
    pytest.mark.integration,
    pytest.mark.ray,
    pytest.mark.postgres,
    pytest.mark.timeout(900),
]

LEASE = 20
MIN_RUN_S = 20
LOW = 500  # iterations of the preempted job
URGENT = 200  # iterations of the two jobs that take its GPUs
OTHER = 300


@pytest.fixture(scope="module")
def database_url() -> Iterator[str]:
    """A fresh database on the server named by JIGSAW_TEST_DATABASE_URL, dropped afterwards.
    Unset: skip. Set but unreachable: the connect error fails the test."""
    base = os.environ.get("JIGSAW_TEST_DATABASE_URL")
    if not base:
        pytest.skip("JIGSAW_TEST_DATABASE_URL is not set")
    import psycopg

    name = f"jigsaw_runtime_{secrets.token_hex(4)}"
    admin_url = base.replace("+psycopg", "")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    root, _, _ = base.rpartition("/")
    try:
        yield f"{root}/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def deployment(database_url: str) -> Iterator[dict[str, Any]]:
    cluster = LocalRayCluster()
    server: ServerProcess | None = None
    try:
        cluster.start_head()
        cluster.add_worker("worker-1", gpus=2)
        cluster.add_worker("worker-2", gpus=2)
        token = secrets.token_hex(20)
        env = {
            **base_env(),
            "JIGSAW_DATABASE_URL": database_url,
            "JIGSAW_ADMIN_TOKEN": token,
            "JIGSAW_DATA_DIR": str(cluster.temp_dir / "data"),
            "XDG_CONFIG_HOME": str(cluster.temp_dir / "config"),
            "JIGSAW_EXECUTOR": "ray",
            "JIGSAW_RAY_ADDRESS": cluster.address,
            "JIGSAW_CHECKPOINT_DIR": str(cluster.temp_dir / "checkpoints"),
            "JIGSAW_POLICY": "las",
            # LAS keeps a fresh gang for min_run_s before it may be preempted (30 min by
            # default); 20 s lets "low" be preempted well before it could finish.
            "JIGSAW_POLICY_OPTIONS": json.dumps({"min_run_s": MIN_RUN_S}),
            "JIGSAW_ROUND_SECONDS": "0.5",
            "JIGSAW_LEASE_ITERATIONS": str(LEASE),
            "JIGSAW_RETRY_BACKOFF_S": "1",
        }
        server = ServerProcess(env, cluster.temp_dir / "server.log")
        server.wait_ready()
        client = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
        wait_for(lambda: gpus_alive(client) == 4, 90, "both worker nodes to join", server=server)
        cli_env = {**env, "JIGSAW_URL": server.url, "JIGSAW_TOKEN": token}
        try:
            yield {"cluster": cluster, "server": server, "client": client, "cli_env": cli_env}
        finally:
            client.close()
    finally:
        if server is not None:
            server.stop()
        cluster.stop()


def gpus_alive(client: httpx.Client) -> int:
    nodes = client.get("/api/v1/cluster/nodes").json()["items"]
    return sum(n["num_gpus"] for n in nodes if n["alive"])


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


def wait_for(
    condition: Any, timeout_s: float, what: str, step_s: float = 1.0, server: Any = None
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(step_s)
    log = server.log_path.read_text(errors="replace")[-4000:] if server is not None else ""
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}\n{log}")


def submit(env: dict[str, str], **spec: Any) -> str:
    args = [sys.executable, "-m", "cli", "submit", "-o", "json"]
    for key, value in spec.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["id"])


def test_preemption_resume_and_a_killed_worker_all_end_in_success(
    deployment: dict[str, Any],
) -> None:
    client: httpx.Client = deployment["client"]
    cluster: LocalRayCluster = deployment["cluster"]
    env = deployment["cli_env"]
    server = deployment["server"]

    def job(job_id: str) -> dict[str, Any]:
        return dict(client.get(f"/api/v1/jobs/{job_id}").json())

    # "low" fills all four GPUs, paced to at most ~10 it/s (so 500 iterations take 50 s or
    # more) so it is still running when LAS's minimum run time (20 s here) lets the
    # higher-priority jobs take its GPUs.
    low = submit(
        env, name="low", model="tests.runtime.faulty:paced_mlp", workers=4, iterations=LOW,
        priority=-1, spb="staircase",
    )  # fmt: skip
    wait_for(lambda: job(low)["state"] == "RUNNING", 120, "low to run", server=server)
    urgent = submit(
        env, name="urgent", model="digits_cnn", workers=2, iterations=URGENT, priority=10,
        spb="staircase",
    )  # fmt: skip
    other = submit(
        env, name="other", model="digits_cnn", workers=2, iterations=OTHER, priority=0,
        spb="staircase",
    )  # fmt: skip
    wait_for(lambda: job(low)["state"] == "PREEMPTED", 240, "low's preemption", server=server)
    # Kill every gang worker while at least one of urgent and other is running with three
    # leases or more still to go, so the kill lands in a live gang. On a loaded machine the
    # two need not overlap (one start can fail its placement while low's GPUs drain, and
    # the other finish first), so the test does not wait for both at once.
    targets = {urgent: URGENT, other: OTHER}

    def one_running_with_work_left() -> bool:
        if job(low)["state"] == "RUNNING":
            return False
        return any(
            (d := job(j))["state"] == "RUNNING" and d["iterations_done"] <= n - 3 * LEASE
            for j, n in targets.items()
        ) and bool(cluster.gang_worker_pids())

    wait_for(one_running_with_work_left, 180, "urgent or other to run on low's GPUs", server=server)
    time.sleep(1)  # into a lease: the kill lands mid-iteration
    victims = cluster.gang_worker_pids()
    assert victims
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_for(
        lambda: all(job(j)["state"] == "SUCCEEDED" for j in (low, urgent, other)),
        420,
        "all three jobs to succeed",
        step_s=2.0,
        server=server,
    )

    jobs = {j: job(j) for j in (low, urgent, other)}
    assert jobs[low]["preemptions"] >= 1 and jobs[low]["iterations_done"] == LOW
    assert sum(jobs[j]["failures"] for j in (urgent, other)) >= 1
    events = {
        j: client.get(f"/api/v1/jobs/{j}/events").json()["items"] for j in (low, urgent, other)
    }
    preempted = [e for e in events[low] if e["to_state"] == "PREEMPTED"]
    assert any("preempted by" in e["reason"] for e in preempted), preempted
    retried = [e for j in (urgent, other) for e in events[j] if e["to_state"] == "RETRYING"]
    assert retried and any("died" in e["reason"] for e in retried), retried

    for job_id in (low, urgent, other):
        samples = client.get(f"/api/v1/jobs/{job_id}/progress").json()["items"]
        losses = [s["loss"] for s in samples if s.get("loss") is not None]
        assert len(losses) >= 3 and losses[-1] < losses[0], (job_id, losses)

    # The resumed job continued from its checkpoint: its iteration count never restarted.
    samples = client.get(f"/api/v1/jobs/{low}/progress").json()["items"]
    preempted_at = moment(preempted[0]["at"])
    before = [s["iteration"] for s in samples if moment(s["at"]) <= preempted_at]
    after = [s["iteration"] for s in samples if moment(s["at"]) > preempted_at]
    assert before and after
    assert min(after) > max(before)
    # Stopped at the next control point, then one lease after the restore.
    assert min(after) <= max(before) + 3 * LEASE
