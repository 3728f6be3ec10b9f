"""`jigsaw-cli simulate --sharing --interference`: the replay runs under the named sharing
mode and penalty, and a bad value is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TRACE = ROOT / "tests" / "data" / "philly_excerpt.csv"


def simulate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", "simulate", str(TRACE), "--gpus", "16", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_summary_says_which_sharing_ran() -> None:
    done = simulate(
        "--policy", "fifo", "-o", "json", "--sharing", "concurrent", "--interference", "0.2"
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["sharing"], summary["interference"]) == ("concurrent", 0.2)
    default = json.loads(simulate("--policy", "fifo", "-o", "json").stdout)
    assert (default["sharing"], default["interference"]) == ("timeslice", 0.0)


def test_bad_sharing_settings_exit_2_with_one_line() -> None:
    for args, expected in (
        (("--sharing", "mps"), "unknown sharing mode 'mps'; choose one of: timeslice, concurrent"),
        (("--interference", "2"), "interference must be a number from 0 to 0.9"),
        (("--interference", "nan"), "interference must be a number from 0 to 0.9"),
    ):
        done = simulate("--policy", "fifo", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.strip().splitlines() == [done.stderr.strip()], done.stderr
        assert expected in done.stderr and "Traceback" not in done.stderr
