"""The dashboard in headless Chromium against a real server with jobs.

Needs Debian's ``chromium`` (``apt-get install -y chromium``) and playwright-core
(``npm install`` in tests/browser). Without them the test skips locally, but fails in CI
(env ``CI`` set), where they must be installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import REPO, StartServer

pytestmark = [pytest.mark.browser, pytest.mark.integration]
HERE = Path(__file__).resolve().parent
ARTIFACTS = REPO / "artifacts"


def require(condition: bool, reason: str) -> None:
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (required in CI)")
    pytest.skip(reason)


def chromium_path() -> str | None:
    return os.environ.get("JIGSAW_CHROMIUM") or shutil.which("chromium")


def submit(url: str, token: str, **spec: Any) -> dict[str, Any]:
    response = httpx.post(
        f"{url}/api/v1/jobs", json=spec, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


def get_job(url: str, token: str, job_id: str) -> dict[str, Any]:
    response = httpx.get(
        f"{url}/api/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"}
    )
    job: dict[str, Any] = response.json()
    return job


def test_dashboard_shows_jobs_packing_and_charts(start_server: StartServer) -> None:
    chromium = chromium_path()
    require(chromium is not None, "chromium is not installed (apt-get install -y chromium)")
    node = shutil.which("node")
    require(node is not None, "node is not installed")
    require(
        (HERE / "node_modules" / "playwright-core").is_dir(),
        "playwright-core is not installed (cd tests/browser && npm install)",
    )
    assert chromium is not None and node is not None
    server = start_server(gpus=8, gpus_per_node=4, sim_iterations_per_second=20)
    url, token = server.url, server.admin_token
    jobs = [
        submit(
            url,
            token,
            name="resnet-staircase",
            model="digits_cnn",
            workers=4,
            iterations=100000,
            spb="staircase",
        ),
        submit(
            url,
            token,
            name="bert-uniform",
            model="digits_cnn",
            workers=2,
            iterations=100000,
            spb="uniform:1",
        ),
        submit(url, token, name="small-done", model="digits_cnn", workers=1, iterations=20),
        submit(url, token, name="big-waiting", model="digits_cnn", workers=8, iterations=50),
    ]
    deadline = time.monotonic() + 60
    while get_job(url, token, jobs[1]["id"])["iterations_done"] < 40:
        assert time.monotonic() < deadline, "jobs never made progress"
        time.sleep(0.5)

    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "dashboard.png"
    with tempfile.TemporaryDirectory(prefix="jigsaw-chromium-") as profile:
        result = subprocess.run(
            [node, str(HERE / "dashboard_check.mjs"), f"{url}/", token, str(screenshot), chromium],
            cwd=HERE,
            env={**os.environ, "JIGSAW_BROWSER_PROFILE": profile},
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])

    assert seen["loginShown"]
    assert "refused" in seen["badTokenMessage"]
    assert not seen["tokenInUrl"]
    assert seen["pageErrors"] == []
    unexpected = [e for e in seen["consoleErrors"] if "401" not in e]
    assert unexpected == []
    rows = {row["id"]: row for row in seen["jobRows"]}
    for job in jobs:
        assert job["id"] in rows, f"{job['name']} missing from the jobs table"
    assert rows[jobs[0]["id"]]["state"] == "RUNNING"
    assert rows[jobs[0]["id"]]["plan"]  # the SPB plan is shown
    assert " · " in rows[jobs[0]["id"]]["eta"]  # its eta, with the source named
    assert rows[jobs[3]["id"]]["state"] in ("PENDING", "ADMITTED", "RUNNING")
    assert len(seen["gpus"]) == 8
    packed = {job_id for gpu in seen["gpus"] for job_id in gpu["jobs"]}
    assert {jobs[0]["id"], jobs[1]["id"]} <= packed
    assert seen["charts"] == 2
    assert "GPUs busy" in seen["summary"]
    assert screenshot.stat().st_size > 10_000
