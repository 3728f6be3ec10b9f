"""`jigsaw-cli simulate` as a user runs it: a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "philly_excerpt.csv"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", "simulate", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )


def test_compares_policies_as_json_and_plots(tmp_path: Path) -> None:
    figure = tmp_path / "sim.png"
    done = cli(str(TRACE), "--policy", "fifo,jigsaw", "--gpus", "16", "-o", "json",
               "--plot", str(figure))
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert [r["policy"] for r in payload["results"]] == ["fifo", "jigsaw"]
    for result in payload["results"]:
        assert result["completed"] == result["jobs"] == 40
        for key in ("avg_jct_s", "p50_jct_s", "p99_jct_s", "makespan_s", "utilization",
                    "cluster_efficiency", "preemptions", "wall_s", "eta_source"):
            assert key in result
    assert figure.read_bytes()[:4] == b"\x89PNG"


def test_user_mistakes_exit_2_with_one_line() -> None:
    for args in (
        (str(TRACE), "--policy", "sjf"),
        ("/no/such/trace.csv",),
        (str(TRACE), "--start", "yesterday"),
        (str(ROOT / "pyproject.toml"),),
    ):
        done = cli(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
