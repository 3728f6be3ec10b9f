"""Skipping quiet rounds changes how fast a replay runs, never what it decides.

las and timeslice tell the simulator until when a round with no decisions stays that way
(``stable_until``); the replay jumps over the rounds before it. Each case below replays the
same trace with and without the jump and compares the decision logs line by line. Short LAS
thresholds, a short starvation floor and a short minimum run time make the time-driven
crossings (queue demotions, starvation promotions, protection ends) happen often. jigsaw
promises less (its objective moves with every job's age): only rounds in which nothing is
offered for co-tenancy and either every running gang is protected or pinned, or the answer
holds with every restarted waiting job priced at its discount's limit; its tight case makes
protections end and waiting jobs starve within minutes, its unprotected case leaves every
gang evictable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jigsaw.policies.allocator.config import JigsawConfig
from jigsaw.policies.shared.fairness import LasConfig
from jigsaw.policies.timeslice import TimesliceConfig
from jigsaw.simulator import SimulationSetup, load_jobs, make_oracle, make_rates, replay

DATA = Path(__file__).resolve().parents[2] / "data"
TIGHT_LAS = LasConfig(thresholds=(600.0, 6_000.0), promote_knob=2.0, promote_floor_s=900.0)
CASES: dict[str, dict[str, Any]] = {
    "las-defaults": {"policy": "las", "options": {}},
    "las-tight": {"policy": "las", "options": {"config": TIGHT_LAS, "min_run_s": 300.0}},
    "timeslice-defaults": {"policy": "timeslice", "options": {}},
    "timeslice-tight": {
        "policy": "timeslice",
        "options": {"config": TimesliceConfig(las=TIGHT_LAS, min_run_s=300.0)},
    },
    "jigsaw-defaults": {"policy": "jigsaw", "options": {}},
    "jigsaw-unprotected": {
        # Every gang evictable at once and preempted jobs waiting with rising discounts: the
        # rounds skipped are the ones whose answer holds at the discounts' limit.
        "policy": "jigsaw",
        "options": {"config": JigsawConfig(min_run_s=0.0, guests=False, protect_longest=False)},
    },
    "jigsaw-aging": {
        # Waiting jobs' weights grow every round (wait_weight): evictable gangs and a queue
        # are never quiet, whatever else holds.
        "policy": "jigsaw",
        "options": {"config": JigsawConfig(wait_weight=4.0, min_run_s=300.0)},
    },
    "jigsaw-longest": {
        # The critical path kept running: its pin lapses by the clock when GPUs are idle.
        "policy": "jigsaw",
        "options": {
            "config": JigsawConfig(
                protect_longest=True, critical_share=0.0, remaining_weight=0.0, min_run_s=300.0
            )
        },
    },
    "jigsaw-critical": {
        # The critical path within half the GPUs: waiting jobs become critical as the
        # horizon falls, and which fit changes as running jobs' seconds pass theirs.
        "policy": "jigsaw",
        "options": {"config": JigsawConfig(critical_share=0.5, min_run_s=300.0)},
    },
    "jigsaw-critical-held": {
        # A small share and a large hold: running critical jobs keep their place far longer,
        # so which fit changes when a running one's held seconds pass a waiting one's.
        "policy": "jigsaw",
        "options": {
            "config": JigsawConfig(critical_share=0.25, critical_hold=0.5, min_run_s=300.0)
        },
    },
    "jigsaw-shortest": {
        # Weights from each job's work left when its run began: constant between events.
        "policy": "jigsaw",
        "options": {
            "config": JigsawConfig(remaining_weight=64.0, protect_longest=False, min_run_s=300.0)
        },
    },
    "jigsaw-tight": {
        "policy": "jigsaw",
        "options": {"config": JigsawConfig(min_run_s=300.0, promote_s=900.0, min_hold_s=120.0)},
    },
}


def replay_log(
    trace: str, case: dict[str, Any], *, skip: bool, gavel: bool = False, **setup: Any
) -> tuple[list[str], dict[str, Any]]:
    policy = case["policy"]
    config = SimulationSetup(
        keep_log=True, skip_quiet_rounds=skip, policy_options={policy: case["options"]}, **setup
    )
    oracle = make_oracle(config)
    rates, arrivals = make_rates(load_jobs(DATA / trace, config, oracle), config, oracle)
    result = replay(arrivals, policy, rates, oracle, config, gavel=gavel)
    assert result.log.lines is not None
    return result.log.lines, result.summary


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("gpus", [8, 16])
def test_skipping_quiet_rounds_keeps_every_decision(name: str, gpus: int) -> None:
    case = CASES[name]
    slow, slow_summary = replay_log(
        "philly_excerpt.csv", case, skip=False, gpus=gpus, gpus_per_node=4, seed=3
    )
    fast, fast_summary = replay_log(
        "philly_excerpt.csv", case, skip=True, gpus=gpus, gpus_per_node=4, seed=3
    )
    assert len(slow) >= 40
    assert fast == slow
    assert fast_summary["avg_jct_s"] == slow_summary["avg_jct_s"]
    assert fast_summary["cycles"] <= slow_summary["cycles"]
    if gpus == 8:
        # A crowded cluster has quiet rounds to skip; were none skipped, the comparison
        # above would pass on a no-op.
        assert fast_summary["cycles"] < slow_summary["cycles"]


@pytest.mark.parametrize("name", ["las-defaults", "timeslice-defaults"])
def test_skipping_with_gavel_style_rounds_keeps_every_decision(name: str) -> None:
    """Admission only at 6-minute round boundaries (Gavel's semantics)."""
    case = CASES[name]
    common = {"gpus": 8, "gpus_per_node": 4, "seed": 1, "round_s": 360.0, "admit_in_rounds": True}
    slow, slow_summary = replay_log("philly_excerpt.csv", case, skip=False, **common)
    fast, fast_summary = replay_log("philly_excerpt.csv", case, skip=True, **common)
    assert len(slow) >= 40
    assert fast == slow
    assert fast_summary["cycles"] < slow_summary["cycles"]


@pytest.mark.parametrize("name", ["jigsaw-unprotected", "jigsaw-aging"])
def test_the_limit_price_check_reads_the_round_flat_as_it_reads_its_columns(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quiet-round check reprices the round's flat arrays (``Problem.flat``) instead of a
    copy of its columns. In replays whose waiting jobs' prices move (restarted jobs, aging),
    every answer it gives is the one the copy of the columns gives, and both answers occur."""
    import dataclasses

    from jigsaw.policies.allocator import stability

    original = stability._holds_at_limit_prices
    answers: list[bool] = []

    def both(problem: Any, chosen: Any, objective: Any, **options: Any) -> bool:
        flat_answer = original(problem, chosen, objective, **options)
        assert problem.flat is not None  # the round's own arrays were read
        columns_only = dataclasses.replace(problem, flat=None)
        copy_answer = original(columns_only, chosen, objective, **options)
        assert flat_answer == copy_answer
        answers.append(flat_answer)
        return flat_answer

    monkeypatch.setattr(stability, "_holds_at_limit_prices", both)
    replay_log("philly_excerpt.csv", CASES[name], skip=True, gpus=8, gpus_per_node=4, seed=3)
    assert True in answers and False in answers
