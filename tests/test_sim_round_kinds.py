"""bench/sim_round_kinds.py: how it sorts rounds, and a real replay it leaves unchanged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.sim_round_kinds import RoundKinds, change_between, policy_of, run
from jigsaw.policies.jigsaw import JigsawPolicy

ROOT = Path(__file__).resolve().parents[1]
EXCERPT = "tests/data/philly_excerpt.csv"


def sets(running: str, waiting: str) -> tuple[frozenset[str], frozenset[str]]:
    return frozenset(running.split()), frozenset(waiting.split())


@pytest.mark.parametrize(
    ("before", "after", "change"),
    [
        (None, sets("a", "b"), "first"),
        (sets("a b", "c"), sets("a", "c"), "running-shrank"),
        (sets("a b", "c"), sets("a c", "b"), "running-shrank"),  # b stopped, c started
        (sets("a", "b c"), sets("a b", "c"), "running-changed"),
        (sets("a", "b"), sets("a", "b"), "unchanged"),
        (sets("a", "b"), sets("a", "b c"), "arrivals-only"),
        (sets("a", "b c"), sets("a", "c d"), "other"),  # b left the queue without running
    ],
)
def test_a_round_is_sorted_by_what_changed(
    before: tuple[frozenset[str], frozenset[str]] | None,
    after: tuple[frozenset[str], frozenset[str]],
    change: str,
) -> None:
    assert change_between(before, after) == change


def test_each_round_is_keyed_by_the_last_rounds_outcome_and_its_own() -> None:
    kinds = RoundKinds()
    kinds.record(sets("", "a"), decided=True, cpu_s=0.3)
    kinds.record(sets("a", ""), decided=False, cpu_s=0.1)
    kinds.record(sets("a", ""), decided=False, cpu_s=0.1)
    report = kinds.report()
    assert report["rounds"] == 3 and report["decide_cpu_s"] == pytest.approx(0.5)
    by_key = {(k["change"], k["after"], k["decides"]): k for k in report["kinds"]}
    assert by_key["first", "nothing", "yes"]["rounds"] == 1
    assert by_key["running-changed", "decided", "nothing"]["rounds"] == 1
    assert by_key["unchanged", "nothing", "nothing"]["cpu_share"] == pytest.approx(0.2)
    assert report["kinds"][0]["change"] == "first"  # the dearest kind first


def test_one_policy_only() -> None:
    assert policy_of(["x.csv", "--policy", "las", "--gpus", "16"]) == "las"
    with pytest.raises(SystemExit, match="one --policy"):
        policy_of(["x.csv", "--policy", "fifo,las"])


def test_an_unknown_policy_is_one_readable_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.sim_round_kinds", "--", EXCERPT, "--policy", "nope"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("sim_round_kinds: unknown policy 'nope'; choose one of: ")
    assert "jigsaw" in line


def test_a_wrapped_replay_counts_every_round_and_decides_as_a_plain_one() -> None:
    args = [EXCERPT, "--policy", "jigsaw", "--gpus", "16"]
    plain_decide = JigsawPolicy.decide
    report = run(args)
    assert JigsawPolicy.decide is plain_decide  # the wrapper is gone after the run
    plain = subprocess.run(
        [sys.executable, "-m", "cli", "simulate", *args, "-o", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    replay = json.loads(plain.stdout)
    assert report["replay"]["decision_log_sha256"] == replay["decision_log_sha256"]
    assert report["rounds"] == replay["cycles"] > 0
    assert sum(kind["rounds"] for kind in report["kinds"]) == report["rounds"]
    decided = [kind for kind in report["kinds"] if kind["decides"] == "yes"]
    assert decided and any(kind["decides"] == "nothing" for kind in report["kinds"])
    assert sum(kind["cpu_share"] for kind in report["kinds"]) == pytest.approx(1.0, abs=1e-3)
