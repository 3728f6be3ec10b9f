"""A trace loads and replays with the collector paused (what exists frozen, no automatic
collection), puts it back after, and decides exactly what it decides under the default
collector."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from jigsaw.simulator import SimulationSetup
from jigsaw.simulator.collector import paused_collector
from jigsaw.simulator.trace_replay import prepare_trace
from tests.core.simulator.test_simulator_skip import CASES, replay_log

DATA = Path(__file__).resolve().parents[2] / "data"


def test_the_collector_is_paused_inside_and_put_back_after() -> None:
    threshold = gc.get_threshold()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with paused_collector():
        assert not gc.isenabled()
        assert gc.get_freeze_count() > 0
        garbage: list[object] = []
        garbage.append(garbage)  # a cycle made inside is freed by an explicit collection
        del garbage
        assert gc.collect() >= 1
    assert gc.isenabled() and gc.get_threshold() == threshold
    assert gc.get_freeze_count() == 0


def test_what_a_replay_made_is_not_left_young_for_the_first_collection_to_walk() -> None:
    with paused_collector():
        kept = [[index] for index in range(100_000)]  # outlives the replay, as its results do
    young = gc.get_objects(generation=0)
    assert len(young) < 1_000
    assert any(item is kept[-1] for item in gc.get_objects(generation=2))  # the oldest one


def test_a_collector_paused_before_stays_paused_after() -> None:
    gc.disable()
    try:
        with paused_collector():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_error_inside_puts_the_collector_back() -> None:
    with pytest.raises(RuntimeError), paused_collector():
        raise RuntimeError("a replay that fails")
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize("name", ["las-defaults", "jigsaw-defaults"])
def test_a_replay_under_the_paused_collector_decides_the_same(name: str) -> None:
    case = CASES[name]
    setup = {"gpus": 8, "gpus_per_node": 4, "seed": 3}
    plain, plain_summary = replay_log("philly_excerpt.csv", case, skip=True, **setup)
    config = SimulationSetup(
        keep_log=True, policy_options={case["policy"]: case["options"]}, **setup
    )
    prepared = prepare_trace(DATA / "philly_excerpt.csv", config)
    tuned = prepared.replay(case["policy"])
    assert tuned.log.lines == plain
    assert tuned.summary["avg_jct_s"] == plain_summary["avg_jct_s"]
    assert len(plain) >= 40  # the excerpt makes real decisions
