"""``jigsaw-cli serve`` with the Ray executor stops every Ray process it started when it is
told to stop (issue 30 item 7): Ray's dashboard and runtime-env agents (~230 MB) used to
outlive a clean SIGTERM shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO, free_port, processes_in_session

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.integration]


def test_serve_stops_every_ray_process_it_started_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("JIGSAW_")}
    env.update(
        {
            "PYTHONPATH": str(REPO),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "JIGSAW_DATA_DIR": str(tmp_path / "data"),
            "JIGSAW_PORT": str(port),
            "JIGSAW_EXECUTOR": "ray",
            "JIGSAW_GPUS": "2",
            "JIGSAW_LOCAL_CPUS": "1",
        }
    )
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "cli", "serve"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 180
        while not ready(port):
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        # Ray is up, agents included (serve used to start it after it was ready).
        while not any("ray::DashboardA" in line for line in processes_in_session(server.pid)):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=120) == 0, log.read_text()
        leftover = processes_in_session(server.pid)
        deadline = time.monotonic() + 10  # idle workers take a moment to notice
        while leftover and time.monotonic() < deadline:
            time.sleep(0.5)
            leftover = processes_in_session(server.pid)
    finally:
        if server.poll() is None:
            server.kill()
        leftover_now = processes_in_session(server.pid)
        for line in leftover_now:  # never leave them running, even when the test fails
            os.kill(int(line.split()[0]), signal.SIGKILL)
    assert leftover == [], leftover
    assert "SIGTERM: requests drained, scheduler stopped; shut down" in log.read_text()


def ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False
