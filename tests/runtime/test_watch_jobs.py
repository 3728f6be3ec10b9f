"""`make run`'s narrator (scripts/watch_jobs.py) against a real server on the simulated
executor: the joint allocator sizes an elastic job from what its leases measured (a restart
priced at 1 s, so even a young job may move) and the narrator prints each resize with its
reason as it happens, each start and finish, and the elastic job's rate at its size."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import httpx
import pytest

from tests.conftest import REPO, StartServer

pytestmark = pytest.mark.integration


def test_the_narrator_prints_each_resize_with_its_reason_and_the_rate_at_each_size(
    start_server: StartServer,
) -> None:
    server = start_server(
        gpus=2,
        policy="jigsaw",
        policy_options='{"config": {"restart_s": 1}}',
        sim_iterations_per_second=50,
    )
    headers = {"Authorization": f"Bearer {server.admin_token}"}

    def submit(**spec: object) -> str:
        body = {"model": "mlp", "batch_size": 16, **spec}
        response = httpx.post(f"{server.url}/api/v1/jobs", json=body, headers=headers)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    elastic = submit(name="mlp-elastic", workers=2, min_workers=1, max_workers=2, iterations=1500)
    deadline = time.monotonic() + 60
    while (
        httpx.get(f"{server.url}/api/v1/jobs/{elastic}", headers=headers).json()["state"]
        != "RUNNING"
    ):
        assert time.monotonic() < deadline, "the elastic job never ran"
        time.sleep(0.2)
    newcomer = submit(name="mlp-newcomer", workers=1, iterations=300)
    env = {**server.env, "JIGSAW_URL": server.url, "JIGSAW_TOKEN": server.admin_token}
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "watch_jobs.py"),
            elastic,
            newcomer,
            "--every",
            "3",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    elastic_lines = [line for line in lines if "mlp-elastic" in line]
    resized = [line for line in elastic_lines if "resized:" in line]
    assert resized and re.search(r"jigsaw: (grew|shrank) \d→\d: goodput", resized[0]), lines
    assert any("mlp-newcomer" in line and "PENDING -> ADMITTED" in line for line in lines)
    submitted = next(i for i, line in enumerate(lines) if "mlp-newcomer" in line)
    assert "PENDING: submitted" in lines[submitted]
    assert submitted < lines.index(resized[0]), lines  # both jobs' events in time order
    assert "RUNNING -> SUCCEEDED: reached its iteration target" in elastic_lines[-1], lines
    rates = [line for line in elastic_lines if "1 worker(s): " in line and "it/s" in line]
    assert rates, lines  # its rate at its new size
