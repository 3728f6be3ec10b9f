"""bench/sim_cpu_pair.py: its helpers, and one real side-by-side replay against HEAD.

The end-to-end tests replay tests/data/philly_excerpt.csv (40 jobs, tracked, so the worktree of
HEAD has it too) and check that no worktree is left behind, also when a replay fails; they run
on one xdist worker, so neither sees the other's worktree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.sim_cpu_pair import (
    CACHEGRIND,
    child_command,
    child_env,
    find_all,
    find_key,
    instructions_of,
    median,
)

ROOT = Path(__file__).resolve().parents[1]
PAYLOAD = {
    "trace": "t.csv",
    "results": [
        {"policy": "fifo", "decision_log_sha256": "aaa", "avg_jct_s": 1.0},
        {"policy": "las", "decision_log_sha256": "bbb", "avg_jct_s": 2.0, "nested": {"x": 3}},
    ],
}


def test_find_key_returns_the_first_occurrence_depth_first() -> None:
    assert find_key(PAYLOAD, "avg_jct_s") == 1.0
    assert find_key(PAYLOAD, "x") == 3
    assert find_key({"a": {"k": "deep"}, "k": "top"}, "k") == "top"


def test_find_key_is_none_when_absent_and_find_all_keeps_every_row_in_order() -> None:
    assert find_key(PAYLOAD, "p99_jct_h") is None
    assert find_key([1, "k", None], "k") is None
    assert find_all(PAYLOAD, "decision_log_sha256") == ["aaa", "bbb"]


@pytest.mark.parametrize(
    ("values", "expected"),
    [([3.0], 3.0), ([5.0, 1.0, 3.0], 3.0), ([4.0, 1.0, 3.0, 2.0], 2.5), ([1.0, 2.0], 1.5)],
)
def test_median_of_odd_and_even_counts(values: list[float], expected: float) -> None:
    assert median(values) == expected


def test_the_child_command_runs_the_cli_of_this_interpreter_with_json_output() -> None:
    command = child_command(["trace.csv", "--policy", "fifo"])
    assert command[0] == sys.executable
    assert command[-5:] == ["trace.csv", "--policy", "fifo", "-o", "json"]


def test_under_instructions_the_child_runs_under_cachegrind_and_its_count_is_read() -> None:
    plain = child_command(["trace.csv"])
    counted = child_command(["trace.csv"], instructions=True)
    assert counted == [*CACHEGRIND, *plain]
    assert CACHEGRIND[:2] == ("valgrind", "--tool=cachegrind")
    stderr = "==12== Cachegrind, a tracing profiler\n==12== \n==12== I   refs:   85,361,220,114\n"
    assert instructions_of(stderr) == 85_361_220_114
    assert instructions_of("==12== I refs: 7\n") == 7
    assert instructions_of("no count here") is None


def test_the_child_env_puts_its_tree_first_and_names_the_shared_dir(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    env = child_env(tmp_path / "tree", {"PYTHONPATH": "/elsewhere", "HOME": "/h"}, shared)
    assert env["PYTHONPATH"].split(os.pathsep) == [str(tmp_path / "tree"), "/elsewhere"]
    assert env["JIGSAW_SHARED_DIR"] == str(shared)
    assert env["HOME"] == "/h"
    kept = child_env(tmp_path, {"JIGSAW_SHARED_DIR": "/mine"}, shared)
    assert (kept["PYTHONPATH"], kept["JIGSAW_SHARED_DIR"]) == (str(tmp_path), "/mine")
    assert "JIGSAW_SHARED_DIR" not in child_env(tmp_path, {}, tmp_path / "absent")


def test_the_child_env_wins_over_the_editable_install(tmp_path: Path) -> None:
    """The project is installed in editable mode (pointing at this checkout); a child started
    elsewhere must still import the ``jigsaw`` of the tree it was given."""
    (tmp_path / "tree" / "jigsaw").mkdir(parents=True)
    (tmp_path / "tree" / "jigsaw" / "__init__.py").write_text("")
    (tmp_path / "elsewhere").mkdir()
    shown = subprocess.run(
        [sys.executable, "-c", "import jigsaw; print(jigsaw.__file__)"],
        cwd=tmp_path / "elsewhere",
        env=child_env(tmp_path / "tree", dict(os.environ), tmp_path / "absent"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.strip() == str(tmp_path / "tree" / "jigsaw" / "__init__.py")


def worktrees() -> str:
    listed = subprocess.run(
        ["git", "worktree", "list", "--porcelain"], cwd=ROOT, capture_output=True, text=True
    )
    return listed.stdout


def run_bench(
    *simulate_args: str, options: tuple[str, ...] = (), timeout: int = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            *("-m", "bench.sim_cpu_pair", "--against", "HEAD", *options, "--"),
            *simulate_args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.xdist_group("sim_cpu_pair")  # one at a time: each compares the worktree list
def test_a_replay_against_head_gives_equal_logs_and_a_ratio() -> None:
    before = worktrees()
    done = run_bench("tests/data/philly_excerpt.csv", "--policy", "fifo,las", "--gpus", "16")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    assert report["against"] == {"ref": "HEAD", "commit": head.stdout.strip()}
    assert report["ours"]["commit"] == head.stdout.strip()
    [pair] = report["pairs"]
    assert pair["ours_cpu_s"] > 0 and pair["theirs_cpu_s"] > 0
    assert pair["ratio"] > 0 and report["median_ratio"] == pair["ratio"]
    assert len(pair["ours_log"].split(",")) == 2  # one decision-log hash per policy
    assert pair["logs_equal"] is True and report["logs_equal"] is True
    assert pair["ours_metrics"]["avg_jct_s"] > 0
    assert worktrees() == before


@pytest.mark.xdist_group("sim_cpu_pair")  # one at a time: each compares the worktree list
def test_a_failed_replay_names_its_side_and_leaves_no_worktree() -> None:
    before = worktrees()
    done = run_bench("tests/data/no_such_trace.csv", "--policy", "fifo")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ours replay failed (exit ")
    assert "no_such_trace.csv" in last
    assert worktrees() == before


@pytest.mark.slow  # both sides under valgrind: about half a minute
@pytest.mark.xdist_group("sim_cpu_pair")  # one at a time: each compares the worktree list
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_instructions_of_the_same_tree_agree_within_a_percent() -> None:
    """HEAD against HEAD: the counts are those of one replay twice, so their ratio is 1 to
    within the count's own noise (a regression to timing would show 5% or more)."""
    before = worktrees()
    done = run_bench(
        "tests/data/philly_excerpt.csv",
        *("--policy", "jigsaw", "--gpus", "16"),
        options=("--instructions",),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    [pair] = report["pairs"]
    assert pair["ours_instructions"] > 1e9 and pair["theirs_instructions"] > 1e9
    assert abs(pair["instruction_ratio"] - 1.0) < 0.01
    assert report["median_instruction_ratio"] == pair["instruction_ratio"]
    assert worktrees() == before
