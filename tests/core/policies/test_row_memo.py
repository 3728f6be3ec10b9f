"""jigsaw keeps the last round's leading steady jobs, their views and columns
(:mod:`jigsaw.policies.allocator.row_memo`); every decision must be the one a policy that
builds every round afresh (``incremental=False``) takes, while holds and minimum runs end,
jobs start, finish and are preempted, and guests come and go."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from jigsaw.goodput.model import BatchLimits
from jigsaw.goodput.source import JobGoodput
from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Decision
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.allocator import configurations
from jigsaw.policies.allocator.config import JigsawConfig
from jigsaw.policies.allocator.row_memo import RowMemo, steady_until
from jigsaw.policies.jigsaw import JigsawPolicy
from jigsaw.simulator import SimulationSetup, load_jobs, make_oracle, make_rates
from jigsaw.simulator.run import replay
from tests.core.policies.test_gang_offers import ORACLE, PLANNER
from tests.core.support import running_job

DATA = Path(__file__).resolve().parents[2] / "data"

CONFIGS = {
    "defaults": JigsawConfig(),
    "short-holds": JigsawConfig(min_run_s=300.0, min_hold_s=120.0),
    "no-guests": JigsawConfig(guests=False, min_run_s=600.0),
    "unprotected": JigsawConfig(min_run_s=0.0, guests=False),
}


def _replay(config: JigsawConfig, incremental: bool, gpus: int) -> list[str]:
    setup = SimulationSetup(
        gpus=gpus,
        gpus_per_node=4,
        seed=3,
        keep_log=True,
        policy_options={"jigsaw": {"config": config, "incremental": incremental}},
    )
    oracle = make_oracle(setup)
    jobs = load_jobs(DATA / "philly_excerpt.csv", setup, oracle)
    rates, arrivals = make_rates(jobs, setup, oracle)
    result = replay(arrivals, "jigsaw", rates, oracle, setup)
    assert result.log.lines is not None
    return result.log.lines


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("gpus", [8, 16])
def test_kept_rows_decide_as_building_every_round_afresh(
    name: str, gpus: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    reused: list[int] = []
    apart: list[int] = []
    original, original_rows = RowMemo.kept, RowMemo.rows_of

    def counted(self: RowMemo, *args: Any) -> int:
        found = original(self, *args)
        reused.append(found)
        return found

    def counted_rows(self: RowMemo, *args: Any) -> list[Any]:
        found = original_rows(self, *args)
        apart.append(sum(row is not None for row in found))
        return found

    renamed: list[tuple[Any, int]] = []  # holds the columns: no id is reused meanwhile
    original_renamed = configurations._renamed

    def counted_renamed(columns: Any, owner: int) -> Any:
        renamed.append((columns, owner))
        return original_renamed(columns, owner)

    monkeypatch.setattr(RowMemo, "kept", counted)
    monkeypatch.setattr(RowMemo, "rows_of", counted_rows)
    monkeypatch.setattr(configurations, "_renamed", counted_renamed)
    kept_log = _replay(CONFIGS[name], True, gpus)
    afresh_log = _replay(CONFIGS[name], False, gpus)
    assert kept_log == afresh_log
    assert len(kept_log) >= 40
    assert sum(reused) > 100, "the memo was hardly used: the test shows nothing"
    # Rows kept after the leading run too: a steady job behind one that changed.
    assert sum(apart) > 100, "no row was taken out of order: the test shows nothing"
    # A row renamed to a new place is kept so: never renamed to the same place twice.
    places = {(id(columns), owner) for columns, owner in renamed}
    assert renamed and len(places) == len(renamed)


def _pair(config: JigsawConfig) -> tuple[JigsawPolicy, JigsawPolicy]:
    return (
        JigsawPolicy(ORACLE, PLANNER, config=config),
        JigsawPolicy(ORACLE, PLANNER, config=config, incremental=False),
    )


def _kinds(decisions: list[Decision]) -> list[tuple[str, str]]:
    return [(type(decision).__name__, decision.job_id) for decision in decisions]


def test_a_job_whose_minimum_run_ends_is_built_again() -> None:
    """The same running job object, protected in the first round and not in the second: a
    waiting job of higher priority evicts it then, and only then."""
    cluster = Cluster.uniform(1, 1, gpu_memory_bytes=ORACLE.hardware.memory_bytes)
    spec = JobSpec("j", "resnet18_32", 1, 10**6, batch_size=32)
    running = running_job(
        spec, ((0, 0),), full_backprop(1, ORACLE.num_blocks("resnet18_32")), 1_000.0
    )
    waiting = Job("w", JobSpec("w", "resnet18_32", 1, 10**6, batch_size=32, priority=10), 900.0)
    kept, afresh = _pair(JigsawConfig(guests=False, min_run_s=1_800.0))
    for now, evicts in ((1_500.0, False), (3_000.0, True)):
        snapshot = Snapshot(now, cluster, (waiting,), (running,))
        decided = _kinds(kept.decide(snapshot))
        assert decided == _kinds(afresh.decide(snapshot))
        assert (("Preempt", "j") in decided) is evicts, (now, decided)


def test_a_restarted_waiting_job_is_priced_again_as_it_ages() -> None:
    """A preempted job's price of restarting falls as it ages (its discount): with the same
    job objects, a fresh job takes the one GPU first, the restarted one of higher priority
    later; the kept policy never prices it at an earlier round's discount."""
    cluster = Cluster.uniform(1, 1, gpu_memory_bytes=ORACLE.hardware.memory_bytes)
    restarted = Job(
        "a", JobSpec("a", "resnet18_32", 1, 10**6, batch_size=32, priority=1), 0.0, attempt=2
    )
    fresh = Job("b", JobSpec("b", "resnet18_32", 1, 10**6, batch_size=32), 10.0)
    kept, afresh = _pair(JigsawConfig(guests=False, restart_s=3_000.0))
    starts = []
    for now in (2_000.0, 2_500.0, 40_000.0):  # its discount: 0 until 3,000 s, then rising
        snapshot = Snapshot(now, cluster, (restarted, fresh), ())
        decided = _kinds(kept.decide(snapshot))
        assert decided == _kinds(afresh.decide(snapshot)), now
        starts.append(decided)
    assert starts[0] == [("Start", "b")] and starts[-1] == [("Start", "a")], starts


def test_only_a_job_whose_prices_cannot_move_is_steady() -> None:
    """Steady: a rigid job running at its own size (until its minimum run ends), a fresh
    waiting job with a free launch. Not: a job at a size it did not ask for, a restarted
    waiting job, a job the goodput source knows, a guest, a fresh job whose launch costs."""
    config = JigsawConfig(min_run_s=1_800.0)
    plan2 = full_backprop(2, ORACLE.num_blocks("resnet18_32"))
    spec = JobSpec("j", "resnet18_32", 2, 10**6, batch_size=32)
    own = running_job(spec, ((0, 0), (0, 1)), plan2, 1_000.0)
    assert steady_until(own, None, None, 1_500.0, config) == 2_800.0
    assert steady_until(own, None, None, 3_000.0, config) == math.inf
    assert steady_until(own, None, "h", 1_500.0, config) == -math.inf
    known = JobGoodput(BatchLimits(64, 4096, 16, 256), None, 0)
    assert steady_until(own, known, None, 1_500.0, config) == -math.inf
    smaller = replace(own, placement=((0, 0),))
    assert steady_until(smaller, None, None, 1_500.0, config) == -math.inf
    fresh = Job("f", spec, 10.0)
    assert steady_until(fresh, None, None, 1_500.0, config) == math.inf
    assert steady_until(fresh, None, None, 1_500.0, JigsawConfig(launch_s=30.0)) == -math.inf
    assert steady_until(replace(fresh, attempt=2), None, None, 1_500.0, config) == -math.inf
