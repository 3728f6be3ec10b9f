"""The dashboard in headless Chromium against a real server with jobs.

Needs Debian's ``chromium`` (``apt-get install -y chromium``) and playwright-core
(``npm install`` in tests/browser). Without them the test skips locally, but fails in CI
(env ``CI`` set), where they must be installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from jigsaw.efficiency.pipeline import model_pipeline_eta
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


def look_at_dashboard(
    node: str, chromium: str, url: str, token: str, screenshot: Path
) -> dict[str, Any]:
    """Run dashboard_check.mjs in headless Chromium; what it saw, as a dict."""
    ARTIFACTS.mkdir(exist_ok=True)
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
    seen: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return seen


def browser_tools() -> tuple[str, str]:
    """Chromium and node, or skip (fail in CI) naming what to install."""
    chromium = chromium_path()
    require(chromium is not None, "chromium is not installed (apt-get install -y chromium)")
    node = shutil.which("node")
    require(node is not None, "node is not installed")
    require(
        (HERE / "node_modules" / "playwright-core").is_dir(),
        "playwright-core is not installed (cd tests/browser && npm install)",
    )
    assert chromium is not None and node is not None
    return chromium, node


def assert_nothing_scrolls_sideways_at_420_px(seen: dict[str, Any]) -> None:
    narrow = seen["narrow"]
    assert narrow["width"] <= 420, narrow
    assert narrow["scrollWidth"] <= narrow["width"], narrow
    assert narrow["sticking"] == [], narrow


def test_dashboard_shows_jobs_packing_and_charts(start_server: StartServer) -> None:
    chromium, node = browser_tools()
    server = start_server(gpus=10, gpus_per_node=4, sim_iterations_per_second=20)
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
        submit(
            url,
            token,
            name="mlp-pipeline",
            model="mlp",
            workers=2,
            iterations=100000,
            parallelism="pipeline",
        ),
        submit(url, token, name="small-done", model="digits_cnn", workers=1, iterations=20),
        submit(url, token, name="big-waiting", model="digits_cnn", workers=8, iterations=50),
        submit(
            url,
            token,
            name="mlp-hybrid",
            model="mlp",
            workers=2,
            iterations=50,
            parallelism="hybrid",
        ),
    ]
    pipeline, hybrid = jobs[2], jobs[5]
    deadline = time.monotonic() + 60
    while get_job(url, token, jobs[1]["id"])["iterations_done"] < 40:
        assert time.monotonic() < deadline, "jobs never made progress"
        time.sleep(0.5)

    screenshot = ARTIFACTS / "dashboard.png"
    seen = look_at_dashboard(node, chromium, url, token, screenshot)

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
    assert rows[jobs[4]["id"]]["state"] in ("PENDING", "ADMITTED", "RUNNING")
    # A pipeline job is as visible as an SPB one: its plan, its η, its workers' stages.
    assert rows[pipeline["id"]]["plan"] == "pipeline · 2 stages", rows[pipeline["id"]]
    # Its η is 2BW's one-step weight delay at its lr (the default 0.05), as auto ranks it;
    # the hybrid's (waiting behind big-waiting: the plan it will run) is 1, exact synchronous
    # SGD with no SPB.
    delayed = model_pipeline_eta("mlp", 0.05)
    assert delayed < 0.3
    assert rows[pipeline["id"]]["eta"] == f"{delayed:.3f} · 2BW's one-step weight delay"
    assert "lr 0.05, momentum 0.9" in rows[pipeline["id"]]["etaTitle"]
    assert rows[hybrid["id"]]["eta"] == "1.000 · no SPB", rows[hybrid["id"]]
    roles = sorted(
        role for gpu in seen["gpus"] if pipeline["id"] in gpu["jobs"] for role in gpu["roles"]
    )
    assert roles == ["stage 1/2", "stage 2/2"], seen["gpus"]
    assert len(seen["gpus"]) == 10
    packed = {job_id for gpu in seen["gpus"] for job_id in gpu["jobs"]}
    assert {jobs[0]["id"], jobs[1]["id"]} <= packed
    assert seen["charts"] == 2
    assert "GPUs busy" in seen["summary"]
    assert screenshot.stat().st_size > 10_000
    assert_nothing_scrolls_sideways_at_420_px(seen)


def quickstart_policy_options() -> str:
    """The policy options `make run` uses, read from scripts/quickstart.sh (one source)."""
    script = (REPO / "scripts" / "quickstart.sh").read_text()
    found = re.search(r"JIGSAW_POLICY_OPTIONS:-'(\{.*\})'", script)
    assert found, "scripts/quickstart.sh no longer sets default JIGSAW_POLICY_OPTIONS"
    return found.group(1)


def shared_gpus(url: str, token: str) -> list[set[str]]:
    """The job ids on each GPU that holds workers of two or more jobs (from the API)."""
    response = httpx.get(f"{url}/api/v1/cluster/gpus", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    on_gpu = [{w["job_id"] for w in gpu["workers"]} for gpu in response.json()["items"]]
    return [jobs for jobs in on_gpu if len(jobs) > 1]


@pytest.mark.parametrize(
    ("sharing", "over", "host_model"),
    [("timeslice", "sliced", "resnet50_224"), ("concurrent", "at once", "resnet18_224")],
)
def test_dashboard_shows_the_make_run_packing(
    start_server: StartServer, sharing: str, over: str, host_model: str
) -> None:
    # The `make run` scenario (scripts/quickstart.sh) with the same policy and options, on the
    # simulated executor instead of Ray, with models the allocator packs: a 4-worker ImageNet
    # resnet (batch 64: its SPB partial ranks leave a guest room, in turns for resnet50, at
    # once for resnet18 under concurrent sharing's fit) fills 4 GPUs, 1-worker resnet18s
    # arrive, jigsaw packs them onto the host's GPUs (the digits CNN of `make run` leaves no
    # slack to share); the packing view marks those GPUs.
    chromium, node = browser_tools()
    server = start_server(
        gpus=4,
        gpus_per_node=4,
        sim_iterations_per_second=20,
        policy="jigsaw",
        policy_options=quickstart_policy_options(),
        sharing=sharing,
    )
    url, token = server.url, server.admin_token
    host = submit(
        url,
        token,
        name="host",
        model=host_model,
        workers=4,
        iterations=100000,
        spb="auto",
        batch_size=64,
    )
    deadline = time.monotonic() + 60
    while get_job(url, token, host["id"])["state"] != "RUNNING":
        assert time.monotonic() < deadline, "the host never started"
        time.sleep(0.3)
    # Three guests: one alone gains less than the staircase costs the host (it would wait).
    guests = [
        submit(
            url,
            token,
            name=f"guest-{i}",
            model="resnet18_32",
            workers=1,
            iterations=100000,
            spb="auto",
            batch_size=32,
        )
        for i in range(3)
    ]
    while not shared_gpus(url, token):
        assert time.monotonic() < deadline + 60, (
            "jigsaw never packed the guests",
            [get_job(url, token, guest["id"]) for guest in guests],
            server.log()[-3000:],
        )
        time.sleep(0.3)
    guest_ids = {guest["id"] for guest in guests}
    pairs = shared_gpus(url, token)
    assert pairs and all(
        len(pair) == 2 and host["id"] in pair and pair - {host["id"]} <= guest_ids for pair in pairs
    ), pairs

    seen = look_at_dashboard(node, chromium, url, token, ARTIFACTS / "dashboard-packing.png")

    assert seen["pageErrors"] == []
    assert len(seen["gpus"]) == 4
    shared = [gpu for gpu in seen["gpus"] if gpu["shared"]]
    assert len(shared) == len(pairs), seen["gpus"]
    assert {frozenset(gpu["jobs"]) for gpu in shared} == {frozenset(pair) for pair in pairs}
    unshared = [gpu for gpu in seen["gpus"] if not gpu["shared"]]
    assert all(gpu["jobs"] == [host["id"]] for gpu in unshared)
    # A GPU's load never reads over 100%: an over-booked one says how it is shared instead
    # (in turns, or at once under JIGSAW_SHARING=concurrent).
    loads = [int(gpu["load"].split("%")[0]) for gpu in seen["gpus"]]
    assert max(loads) <= 100, seen["gpus"]
    assert all(gpu["load"] == f"100% · {over}" for gpu in shared), shared
    assert_nothing_scrolls_sideways_at_420_px(seen)
