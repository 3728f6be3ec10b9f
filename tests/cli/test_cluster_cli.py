"""cluster, queue, the service verbs (serve, scheduler) and the process-level conventions."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import Cli, base_env, one_line_error, small_job, submit_json
from tests.conftest import REPO, free_port

pytestmark = pytest.mark.integration


def test_cluster_shows_gpus_and_which_workers_share_them(cli: Cli) -> None:
    job = submit_json(cli, *small_job("occupant", iterations=100000, workers=2))
    deadline = time.monotonic() + 30
    while json.loads(cli("status", str(job["id"]), "-o", "json").stdout)["state"] != "RUNNING":
        assert time.monotonic() < deadline, "job never started"
        time.sleep(0.3)
    data = json.loads(cli("cluster", "-o", "json").stdout)
    assert sum(node["num_gpus"] for node in data["nodes"]) == len(data["gpus"])
    workers = [w for gpu in data["gpus"] for w in gpu["workers"] if w["job_id"] == job["id"]]
    assert sorted(w["rank"] for w in workers) == [0, 1]
    table = cli("cluster")
    assert table.returncode == 0, table.stderr
    assert "Nodes" in table.stdout and "GPUs" in table.stdout
    assert "occupant/r0" in table.stdout
    cli("cancel", str(job["id"]))


def test_queue_lists_waiting_jobs_with_positions(cli: Cli) -> None:
    hog = submit_json(cli, *small_job("hog", iterations=100000, workers=4))
    waiting = submit_json(cli, *small_job("waiter", iterations=10, workers=4))
    deadline = time.monotonic() + 30
    while True:
        items = json.loads(cli("queue", "-o", "json").stdout)["items"]
        positions = {item["job_id"]: item["position"] for item in items}
        if waiting["id"] in positions and hog["id"] not in positions:
            break
        assert time.monotonic() < deadline, items
        time.sleep(0.3)
    assert positions[waiting["id"]] >= 1
    table = cli("queue")
    assert "waiter" in table.stdout and "POS" in table.stdout
    for job in (hog, waiting):
        cli("cancel", str(job["id"]))


def test_unreachable_server_exits_1_naming_the_url(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    cli = Cli({**base_env(tmp_path), "JIGSAW_URL": url, "JIGSAW_TOKEN": "jgs_x"})
    for args in (["list"], ["submit", *small_job("x")]):
        result = cli(*args)
        assert result.returncode == 1, args
        assert url in one_line_error(result.stderr)


def test_usage_errors_exit_2_without_a_traceback(tmp_path: Path) -> None:
    cli = Cli(base_env(tmp_path))
    mistakes = (["submit", "--workers", "many"], ["list", "-o", "xml"])
    for args in mistakes:
        result = cli(*args)
        assert result.returncode == 2, args
        assert "Traceback" not in result.stderr


def test_no_color_is_respected(cli: Cli) -> None:
    submit_json(cli, *small_job("colourful"))
    color_code = re.compile(r"\x1b\[[0-9;]*(3[0-7]|9[0-7]|38;)")
    colored = cli("list", FORCE_COLOR="1")
    assert color_code.search(colored.stdout)
    plain = cli("list", FORCE_COLOR="1", NO_COLOR="1")
    assert not color_code.search(plain.stdout)  # bold may stay: NO_COLOR is about colour


def test_console_script_entry_point(tmp_path: Path) -> None:
    entry = Path(sys.executable).parent / "jigsaw-cli"
    if not entry.exists():
        pytest.skip("jigsaw-cli is not installed in this venv (pip install -e . installs it)")
    result = subprocess.run([str(entry), "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    for verb in (
        "submit",
        "list",
        "status",
        "describe",
        "logs",
        "cancel",
        "cluster",
        "queue",
        "serve",
        "scheduler",
        "token",
    ):
        assert verb in result.stdout


@pytest.mark.slow
def test_serve_and_a_separate_scheduler_process_run_a_job(tmp_path: Path) -> None:
    """``serve`` with its embedded scheduler off, plus ``scheduler``: together they finish a job."""
    env = {
        **base_env(tmp_path),
        "JIGSAW_SCHEDULER": "off",
        "JIGSAW_ROUND_SECONDS": "0.2",
        "JIGSAW_SIM_ITERATIONS_PER_SECOND": "50",
    }
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp_path / "serve.log").open("wb")
    serve = subprocess.Popen(
        [sys.executable, "-m", "cli", "serve", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    scheduler: subprocess.Popen[bytes] | None = None
    try:
        _wait_healthy(url, serve, tmp_path / "serve.log")
        token_line = (tmp_path / "config" / "jigsaw" / "config.toml").read_text()
        assert "token" in token_line
        cli = Cli({**env, "JIGSAW_URL": url})  # token from the config file serve wrote
        job = submit_json(cli, *small_job("two-processes", iterations=20))
        time.sleep(1.0)
        pending = json.loads(cli("status", str(job["id"]), "-o", "json").stdout)
        assert pending["state"] == "PENDING", "no scheduler should be running yet"
        scheduler = subprocess.Popen(
            [sys.executable, "-m", "cli", "scheduler"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        watched = cli("status", str(job["id"]), "--watch", timeout=120)
        assert watched.returncode == 0, (tmp_path / "serve.log").read_text()[-3000:]
    finally:
        for process in (scheduler, serve):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
        log.close()


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, log_path.read_text()
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"server not healthy in 60 s:\n{log_path.read_text()}")
