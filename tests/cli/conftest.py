"""Fixtures for driving the real CLI (``python -m cli``) against a real server process.

One server per test module keeps the suite lean: starting a control plane costs seconds on
the shared 2-core box, and these tests only add jobs, so they do not disturb each other.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, ServerProcess, _launch, free_port

FAST_SIMULATION = {
    "JIGSAW_ROUND_SECONDS": "0.2",
    "JIGSAW_SIM_ITERATIONS_PER_SECOND": "50",
    "JIGSAW_RETRY_BACKOFF_S": "0.5",
}


def base_env(home: Path) -> dict[str, str]:
    """The caller's environment minus anything JigSaw-specific, with private config dirs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JIGSAW_", "NO_COLOR"))}
    env.update(
        {
            "PYTHONPATH": str(REPO),
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_DATA_HOME": str(home / "data"),
            "JIGSAW_DATA_DIR": str(home / "data"),
        }
    )
    return env


def start_embedded_server(home: Path, **settings: str) -> ServerProcess:
    home.mkdir(parents=True, exist_ok=True)
    env = base_env(home)
    env.update(FAST_SIMULATION)
    env["JIGSAW_PORT"] = str(free_port())
    env.update(settings)
    return _launch(env, home / "server.log", None)


def stop(server: ServerProcess) -> None:
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


@dataclass
class Cli:
    """Runs ``python -m cli`` as a subprocess with a given server URL and token."""

    env: dict[str, str]

    def __call__(
        self, *args: str, input: str | None = None, timeout: float = 60, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cli", *args],
            cwd=REPO,
            env={**self.env, **env},
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def popen(self, *args: str, **env: str) -> subprocess.Popen[str]:
        """The CLI as a process a test can interrupt: Ctrl-C (SIGINT) reaches it as at a
        terminal, whatever the test process inherited or blocked. A child inherits SIGINT
        ignored (a shell starts a background job so; Python then installs no
        KeyboardInterrupt handler) and the signal mask (a blocked SIGINT is never
        delivered): under ``make test``, a watcher printed on through the test's SIGINT."""
        return subprocess.Popen(
            [sys.executable, "-m", "cli", *args],
            cwd=REPO,
            env={**self.env, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_interruptible,
        )

    def with_token(self, token: str | None) -> Cli:
        env = dict(self.env)
        env.pop("JIGSAW_TOKEN", None)
        if token is not None:
            env["JIGSAW_TOKEN"] = token
        return Cli(env)


@pytest.fixture(scope="module")
def cli_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_embedded_server(tmp_path_factory.mktemp("cli-server"))
    yield server
    stop(server)


@pytest.fixture
def cli(cli_server: ServerProcess, tmp_path: Path) -> Cli:
    """The CLI pointed at the module's server with its admin token (from env, not a flag)."""
    env = base_env(tmp_path)
    env["JIGSAW_URL"] = cli_server.url
    env["JIGSAW_TOKEN"] = cli_server.admin_token
    return Cli(env)


def one_line_error(stderr: str) -> str:
    """User mistakes print exactly one readable line and never a traceback."""
    assert "Traceback" not in stderr
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def submit_json(cli: Cli, *args: str) -> dict[str, object]:
    result = cli("submit", *args, "-o", "json")
    assert result.returncode == 0, result.stderr
    job: dict[str, object] = json.loads(result.stdout)
    return job


def small_job(name: str, iterations: int = 20, workers: int = 2) -> list[str]:
    return [
        "--name",
        name,
        "--model",
        "digits_cnn",
        "--workers",
        str(workers),
        "--iterations",
        str(iterations),
    ]


def _interruptible() -> None:
    """In the child, before the CLI starts: SIGINT back to its default and unblocked, so
    Python turns it into KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
