"""The thin end-to-end path (issue 2): a real server process, HTTP submission, the simulated
executor, the job reaching SUCCEEDED — on the embedded SQLite default and on Postgres."""

from __future__ import annotations

import os
import stat
import time
import tomllib
from pathlib import Path

import httpx
import pytest

from tests.conftest import ServerProcess, StartServer

pytestmark = pytest.mark.integration
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


def wait_for_state(client: httpx.Client, job_id: str, states: set[str], timeout: float = 60):
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(f"/api/v1/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        assert time.monotonic() < deadline, f"job stuck in {job['state']}: {job}"
        time.sleep(0.1)


def run_thin_path(server: ServerProcess) -> None:
    url, token, _env = server
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=str(url), headers=headers, timeout=10) as client:
        spec = {"name": "demo", "model": "digits_cnn", "workers": 4, "iterations": 20}
        submitted = client.post("/api/v1/jobs", json=spec)
        assert submitted.status_code == 201, submitted.text
        job_id = submitted.json()["id"]
        done = wait_for_state(client, job_id, TERMINAL)
        assert done["state"] == "SUCCEEDED", done
        assert done["iterations_done"] == 20 and done["progress"] == 1.0
        assert done["started_at"] and done["finished_at"] and done["placement"] == []
        events = client.get(f"/api/v1/jobs/{job_id}/events").json()["items"]
        assert [e["to_state"] for e in events] == ["PENDING", "ADMITTED", "RUNNING", "SUCCEEDED"]
        progress = client.get(f"/api/v1/jobs/{job_id}/progress").json()["items"]
        assert progress and progress[-1]["iteration"] == 20
        logs = client.get(f"/api/v1/jobs/{job_id}/logs").json()
        assert any("SUCCEEDED" in line["line"] for line in logs["items"])
        assert client.get(f"/api/v1/jobs/{job_id}/logs?after={logs['next']}").json()["items"] == []
        scheduler = client.get("/api/v1/scheduler").json()
        assert scheduler["leader"] and scheduler["epoch"] >= 1 and scheduler["round"] > 0
        assert scheduler["last_decisions"][-1]["job_id"] == job_id
        metrics = httpx.get(f"{url}/metrics").text
        assert "jigsaw_submissions_total 1.0" in metrics
        assert "jigsaw_job_wait_seconds_count 1.0" in metrics


def test_thin_path_on_the_embedded_sqlite_default(server: ServerProcess) -> None:
    run_thin_path(server)
    config = Path(server.env["XDG_CONFIG_HOME"]) / "jigsaw" / "config.toml"
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o600
    values = tomllib.loads(config.read_text())
    assert values["url"] == server.url and values["token"] == server.admin_token
    assert str(config) in server.log()


@pytest.mark.postgres
def test_thin_path_on_postgres(start_server: StartServer, postgres_url: str) -> None:
    run_thin_path(start_server(postgres_url))


def test_cancelling_a_running_job_frees_its_gpus_for_the_next(server: ServerProcess) -> None:
    headers = {"Authorization": f"Bearer {server.admin_token}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=10) as client:
        spec = {"name": "long", "model": "mlp", "workers": 2, "iterations": 100_000}
        job_id = client.post("/api/v1/jobs", json=spec).json()["id"]
        wait_for_state(client, job_id, {"RUNNING"})
        cancelled = client.post(f"/api/v1/jobs/{job_id}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["state"] == "CANCELLED"
        # A job that needs every GPU can now run to the end.
        whole = {"name": "whole", "model": "mlp", "workers": 4, "iterations": 10}
        after = client.post("/api/v1/jobs", json=whole).json()["id"]
        assert wait_for_state(client, after, TERMINAL)["state"] == "SUCCEEDED"
        again = client.post(f"/api/v1/jobs/{job_id}/cancel")
        assert again.status_code == 409 and again.json()["state"] == "CANCELLED"
