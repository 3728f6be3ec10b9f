"""Running the control plane as an operator does (issue 25, item 6): ``jigsaw-cli serve``
says where its dashboard is, drains and exits 0 on SIGTERM (what systemd, Docker and
Kubernetes send) as on SIGINT, and a port in use costs one line and leaves no process behind,
also through ``make run`` (scripts/quickstart.sh) with the Ray executor."""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import FAST_SIMULATION, base_env
from tests.conftest import REPO, free_port, processes_in_session

pytestmark = pytest.mark.integration


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def serve_env(home: Path, port: int, **settings: str) -> dict[str, str]:
    env = base_env(home)
    env.update(FAST_SIMULATION)
    env["JIGSAW_PORT"] = str(port)
    env.update(settings)
    return env


@dataclasses.dataclass(frozen=True)
class Stop:
    signal: signal.Signals
    says: str


@pytest.mark.parametrize(
    "stop",
    [Stop(signal.SIGTERM, "SIGTERM: requests drained"), Stop(signal.SIGINT, "SIGINT: requests")],
    ids=lambda stop: stop.signal.name,
)
def test_serve_says_where_the_dashboard_is_and_drains_on_a_signal(
    tmp_path: Path, stop: Stop
) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "cli", "serve"],
            cwd=REPO,
            env=serve_env(tmp_path, port),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, log.read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        server.send_signal(stop.signal)
        code = server.wait(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    text = log.read_text()
    assert code == 0, text
    assert f"dashboard http://127.0.0.1:{port}/" in text
    assert stop.says in text and "Traceback" not in text


@dataclasses.dataclass(frozen=True)
class Start:
    case: str
    command: list[str]
    says: str


STARTS = [
    Start(
        "serve",
        [sys.executable, "-m", "cli", "serve"],
        "jigsaw: cannot listen on 127.0.0.1:{port}: address already in use",
    ),
    Start("make run", ["scripts/quickstart.sh"], "error: port {port} is in use"),
]


@pytest.mark.parametrize("start", STARTS, ids=lambda start: start.case)
def test_a_taken_port_is_one_line_and_leaves_no_process(
    tmp_path: Path, taken_port: int, start: Start
) -> None:
    # The Ray executor: before the fix, serve started Ray before it found the port taken,
    # and Ray's processes outlived it.
    env = serve_env(tmp_path, taken_port, JIGSAW_EXECUTOR="ray", JIGSAW_DATA_DIR=str(tmp_path))
    env["VENV"] = str(Path(sys.executable).parents[1])
    began = time.monotonic()
    result = subprocess.Popen(
        start.command,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = result.communicate(timeout=120)
    finally:
        leftover = processes_in_session(result.pid)
        for line in leftover:  # never leave them running, even when the test fails
            os.kill(int(line.split()[0]), signal.SIGKILL)
    lines = [line for line in (stdout + stderr).splitlines() if line.strip()]
    assert result.returncode == 1, stdout + stderr
    assert len(lines) == 1 and lines[0].startswith(start.says.format(port=taken_port)), lines
    assert leftover == [], leftover
    assert time.monotonic() - began < 60
