"""``submit --watch`` on a real terminal: tmux runs it, capture-pane reads the screen."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.conftest import REPO

pytestmark = pytest.mark.integration


def require_tmux() -> str:
    tmux = shutil.which("tmux")
    if tmux is None:
        if os.environ.get("CI"):
            pytest.fail("tmux is required in CI (apt-get install -y tmux)")
        pytest.skip("tmux is not installed (apt-get install -y tmux)")
    return tmux


def test_submit_watch_draws_a_live_progress_view(cli: Cli, tmp_path: Path) -> None:
    tmux = require_tmux()
    socket = f"jigsaw-test-{os.getpid()}"
    script = tmp_path / "watch.sh"
    exports = "".join(
        f"export {key}={shlex.quote(value)}\n"
        for key, value in cli.env.items()
        if key.startswith(("JIGSAW_", "XDG_", "PYTHONPATH", "PATH", "HOME", "LANG", "LC_"))
    )
    command = [
        sys.executable,
        "-m",
        "cli",
        "submit",
        "--name",
        "on-screen",
        "--model",
        "digits_cnn",
        "--workers",
        "4",
        "--iterations",
        "400",
        "--spb",
        "staircase",
        "--watch",
    ]
    # A detached pane may start at 80 columns and be resized a moment later; bash then
    # exports a stale COLUMNS that rich would trust. Wait for the real size, drop COLUMNS.
    script.write_text(
        f"{exports}export TERM=xterm-256color\ncd {shlex.quote(str(REPO))}\n"
        'for _ in $(seq 50); do [ "$(tput cols)" = 150 ] && break; sleep 0.1; done\n'
        "unset COLUMNS LINES\n"
        f"{shlex.join(command)}\necho EXIT=$?\nsleep 120\n"
    )
    base = [tmux, "-L", socket, "-f", "/dev/null"]
    subprocess.run(
        [*base, "new-session", "-d", "-s", "watch", "-x", "150", "-y", "40", f"bash {script}"],
        check=True,
    )
    try:
        screens: list[str] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            screen = subprocess.run(
                [*base, "capture-pane", "-p", "-t", "watch"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            screens.append(screen)
            if "EXIT=" in screen:
                break
            time.sleep(0.5)
        final = screens[-1]
        assert "EXIT=0" in final, final
        live = [s for s in screens if "RUNNING" in s and "stop depth:" in s and "EXIT=" not in s]
        assert live, "never saw the live view while the job ran:\n" + "\n----\n".join(screens)
        running = live[-1]
        assert "━" in running, running  # the progress bar
        assert "it/s" in running and "left" in running and "loss" in running, running
        assert "ETA" not in running  # time left is "left"; η is statistical efficiency
        assert "r0=0" in running and "r3=3" in running  # each worker's stop depth
        assert "SUCCEEDED" in final
        assert "Traceback" not in "".join(screens)
    finally:
        subprocess.run([*base, "kill-server"], check=False)
