"""Every registered policy decides and changes nothing.

Poison bisection (jigsaw.scheduling.poison) asks a policy about parts of a snapshot, and the
simulator may ask twice about one world: each answer must depend on the snapshot alone, and
asking must leave the policy as it was. So for every policy the registry holds, built as the
service and the simulator build it (``build_policy``), and for the Gavel variants of fifo and
maxmin, which keep an allocation between rounds:

- deciding twice about one snapshot gives the same decisions, and deciding about a subset
  (half its jobs, as the bisection asks) gives what a fresh policy decides about it;
- the policy's state, walked attribute by attribute, is the same before and after.

Caches are the one exception, and only those named in :data:`PURE_CACHES`: each is a
function of its key alone (the test's decisions from a warm policy equal a fresh one's, and
each cache's own tests say more). State a policy carries from round to round is kept by the
cycle's ``end_round`` step, not by ``decide`` (the last test).
"""

from __future__ import annotations

import enum
import functools
import types
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from jigsaw.efficiency.table import EfficiencyTable
from jigsaw.goodput.model import BatchLimits, GoodputModel
from jigsaw.goodput.noise import GradientNoise
from jigsaw.goodput.source import JobGoodput
from jigsaw.goodput.step_time import StepTimeModel
from jigsaw.model.cluster import Cluster, Placement
from jigsaw.model.decisions import Decision, Resize
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies import policy_names
from jigsaw.policies.allocator.gang_offers import GangOfferMemo
from jigsaw.policies.allocator.job_memo import JobMemo
from jigsaw.policies.allocator.longest_job import WaitingWork
from jigsaw.policies.allocator.remaining import RunningSeconds
from jigsaw.policies.allocator.row_memo import RowMemo
from jigsaw.policies.allocator.sharing import GuestHostsMemo
from jigsaw.policies.base import KeepsRoundState, Policy
from jigsaw.policies.builder import build_policy
from jigsaw.policies.jigsaw import JigsawPolicy
from jigsaw.policies.shared.plans import PlanCatalog
from jigsaw.policies.shared.program_memo import ProgramMemo
from jigsaw.policies.speed.round_memory import RecordCache, RoundMemory
from jigsaw.scheduling.poison import restricted
from jigsaw.simulator import SimulationSetup, make_oracle
from tests.core.support import FixedSource, running_job

NOW = 3_600.0

PURE_CACHES: dict[type, frozenset[str]] = {
    # Predictions per (model, batch, plan, placement): the oracle's fixed hardware and tables.
    Oracle: frozenset({"_sharing", "_models", "_plans", "_alone", "_predictions", "_parallel"}),
    # Answers per spec shape, for the planner's fixed hardware and memory limit.
    Planner: frozenset({"_choices"}),
    # eta per (model, plan) from the measured table.
    EfficiencyTable: frozenset({"_cache"}),
    # A model's catalog entry, read once by name.
    ModelCatalog: frozenset({"_entries"}),
    # Plan options per options key, footprints per (job, plan, placement).
    PlanCatalog: frozenset({"_options", "_footprints"}),
    # The kept LAS ranking, LAS gang round and ledger, held to their reference mode decision
    # for decision (tests/core/policies/test_incremental_decisions.py, test_las_ranking.py,
    # test_kept_gang_round.py).
    RoundMemory: frozenset({"_ranking", "_las_round", "_ledger", "_caches"}),
    RecordCache: frozenset({"_answers"}),
    # What each running gang offers co-tenancy, per (job options, plan, GPUs): oracle figures
    # (tests/core/policies/test_gang_offers.py holds it to building afresh).
    GangOfferMemo: frozenset({"_kept", "built"}),
    # The size program's last run, and the rows its trials write: its answer is the whole
    # program's, a trial's too (tests/core/policies/test_program_memo.py).
    ProgramMemo: frozenset(
        {
            "_capacity",
            "_sizes",
            "_costs",
            "_counts",
            "_start",
            "_curves",
            "_picks",
            "_scratch",
            "added",
            "reused",
        }
    ),
    # The last round's leading steady jobs and their columns, kept while valid
    # (tests/core/policies/test_gang_offers.py holds the kept policy to building afresh).
    RowMemo: frozenset(
        {
            "_key",
            "_jobs",
            "_until",
            "_columns_end",
            "_rows",
            "views",
            "columns",
            "reused",
        }
    ),
    # Each job's pace and weight, keyed by the very job object (tests/core/policies/
    # test_work_left.py; the kept weights are held to a policy building afresh by
    # tests/core/policies/test_gang_offers.py).
    JobMemo: frozenset({"_this", "_last", "_rounds"}),
    # The waiting side's work left, keyed by its very job objects
    # (tests/core/policies/test_critical_path.py).
    WaitingWork: frozenset({"_jobs", "_lefts", "_work", "_entries"}),
    # Who runs as whose guest, keyed by the running side's very job objects.
    GuestHostsMemo: frozenset({"_jobs", "_found"}),
    # The running side's seconds left as arrays, keyed by its very job objects
    # (tests/core/policies/test_work_left.py holds them to WorkLeft.seconds, to the bit).
    RunningSeconds: frozenset(
        {"_arrays", "_free", "_gpus", "_held", "_ids", "_jobs", "_rows", "_table"}
    ),
    # The last round's answer, keyed by the very snapshot it came from (stable_until reads it);
    # co-location shares per guest model, batch, plan and host timing (oracle figures).
    JigsawPolicy: frozenset({"_last_round", "_shares"}),
}
"""Attributes that memoise a pure function of their key: left out of the state compared."""

VARIANTS: list[tuple[str, dict[str, Any]]] = [
    *((name, {}) for name in policy_names()),
    ("fifo", {"ranking": "gavel"}),
    ("maxmin", {"ranking": "gavel"}),
]


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return make_oracle(SimulationSetup())


def _spec(name: str, model: str, workers: int, **elastic: int) -> JobSpec:
    return JobSpec(name, model, workers, 10_000, batch_size=32, **elastic)


def _running(oracle: Oracle, spec: JobSpec, gpus: Placement, since: float) -> Job:
    return running_job(spec, gpus, full_backprop(len(gpus), oracle.num_blocks(spec.model)), since)


def _world(oracle: Oracle) -> Snapshot:
    """Two 4-GPU nodes, nearly full: an elastic gang that has measured a resize, a one-GPU
    job and a 4-GPU gang run; a one-GPU job, a 4-GPU gang and an elastic pair wait."""
    elastic = {"min_workers": 1, "max_workers": 2}
    resized = _running(oracle, _spec("r1", "resnet18_32", 2, **elastic), ((0, 0), (0, 1)), 100.0)
    running = (
        replace(resized, resize_s=30.0, resized_at=50.0, attained_gpu_seconds=2_000.0),
        _running(oracle, _spec("r2", "resnet18_32", 1), ((0, 2),), 200.0),
        _running(oracle, _spec("r3", "resnet50_32", 4), tuple((1, g) for g in range(4)), 300.0),
    )
    waiting = (
        Job("w1", _spec("w1", "resnet18_32", 1), submitted_at=NOW - 100),
        Job("w2", _spec("w2", "resnet50_32", 4), submitted_at=NOW - 90),
        Job("w3", _spec("w3", "resnet18_32", 2, **elastic), submitted_at=NOW - 80),
    )
    cluster = Cluster.uniform(8, 4, gpu_memory_bytes=oracle.hardware.memory_bytes)
    return Snapshot(NOW, cluster, waiting, running)


def _growing(oracle: Oracle) -> Snapshot:
    """Nobody waits and GPUs are free: an elastic gang that measured a resize may grow."""
    world = _world(oracle)
    (resized, *_) = world.running
    spec = replace(resized.spec, max_workers=4, batch_size=48, iterations=100_000)
    resized = replace(resized, spec=spec)
    return replace(world, waiting=(), running=(resized,))


def _state(policy: Policy) -> dict[str, object]:
    """Every attribute reachable from the policy, by path, less the pure caches."""
    found: dict[str, object] = {}
    _walk(policy, "policy", found, {})
    return found


def _walk(value: object, path: str, found: dict[str, object], seen: dict[int, str]) -> None:
    if value is None or isinstance(value, bool | int | float | str | bytes | enum.Enum):
        found[path] = value
        return
    if isinstance(value, types.FunctionType | types.BuiltinFunctionType | type):
        found[path] = value.__qualname__
        return
    if isinstance(value, types.MethodType | functools.partial):
        found[path] = repr(type(value))
        return
    if id(value) in seen:  # shared (the oracle) or a cycle: walked once, where first met
        found[path] = f"<same as {seen[id(value)]}>"
        return
    seen[id(value)] = path
    if isinstance(value, np.ndarray):
        found[path] = (value.shape, value.tobytes())
    elif isinstance(value, list | tuple):
        found[f"{path}#len"] = len(value)
        for index, item in enumerate(value):
            _walk(item, f"{path}[{index}]", found, seen)
    elif isinstance(value, set | frozenset):
        found[path] = sorted(map(repr, value))
    elif isinstance(value, dict | types.MappingProxyType):
        found[f"{path}#keys"] = [repr(key) for key in value]
        for key, item in value.items():
            _walk(item, f"{path}[{key!r}]", found, seen)
    else:
        found[f"{path}#type"] = type(value).__qualname__
        skipped = PURE_CACHES.get(type(value), frozenset())
        for name in _attributes(value):
            if name not in skipped and hasattr(value, name):
                _walk(getattr(value, name), f"{path}.{name}", found, seen)


def _attributes(value: object) -> Iterator[str]:
    for cls in type(value).__mro__:
        slots = getattr(cls, "__slots__", ())
        yield from (slots,) if isinstance(slots, str) else slots
    yield from getattr(value, "__dict__", {})


def _changed(before: dict[str, object], after: dict[str, object]) -> list[str]:
    return sorted(key for key in before.keys() | after.keys() if before.get(key) != after.get(key))


def _half(snapshot: Snapshot) -> Snapshot:
    """The first half of the snapshot's jobs: what the bisection asks about first."""
    jobs = [*snapshot.waiting, *snapshot.running]
    return restricted(snapshot, {job.id for job in jobs[: len(jobs) // 2 + 1]})


@pytest.mark.parametrize(("name", "options"), VARIANTS, ids=lambda v: str(v) if v else "")
@pytest.mark.parametrize("world", [_world, _growing], ids=["busy", "room"])
def test_deciding_changes_nothing_and_depends_on_the_snapshot_alone(
    oracle: Oracle, name: str, options: dict[str, Any], world: Any
) -> None:
    snapshot: Snapshot = world(oracle)
    part = _half(snapshot)
    policy = build_policy(name, oracle, options)
    before = _state(policy)
    first = policy.decide(snapshot)
    assert _changed(before, _state(policy)) == []
    assert policy.decide(snapshot) == first
    on_part = policy.decide(part)
    assert _changed(before, _state(policy)) == []
    assert policy.decide(snapshot) == first
    fresh: list[Decision] = build_policy(name, oracle, options).decide(part)
    assert on_part == fresh


def test_the_worlds_ask_something_of_every_policy(oracle: Oracle) -> None:
    """The test above would hold trivially of a policy that decides nothing: each decides
    something in the busy world, and jigsaw prices a grow with the resize measured."""
    for name, options in VARIANTS:
        assert build_policy(name, oracle, options).decide(_world(oracle)), (name, options)
    growing = _growing(oracle)
    (gang,) = growing.running
    limits = BatchLimits(24, 96, 1, 96)
    step = StepTimeModel(1e-3, 1e-3, 1e-6, 1e-6, 1e-6, 1e-6, 1.0)  # scales almost perfectly
    noise = GradientNoise.at_batch(1.0, 10.0, 24)
    known = {gang.id: JobGoodput(limits, GoodputModel(step, noise, limits), len(gang.placement))}
    grows = build_policy("jigsaw", oracle, goodput=FixedSource(known)).decide(growing)
    assert [type(d) for d in grows] == [Resize]


@pytest.mark.parametrize("name", ["fifo", "maxmin"])
def test_gavel_keeps_its_allocation_in_the_step_after_apply(oracle: Oracle, name: str) -> None:
    """Gavel's allocation is reset in ``end_round``, which the cycle calls once a round is
    applied; deciding, twice or about a part, reset nothing."""
    policy = build_policy(name, oracle, {"ranking": "gavel"})
    assert isinstance(policy, KeepsRoundState)
    snapshot = _world(oracle)
    policy.decide(snapshot)
    policy.decide(_half(snapshot))
    fresh = build_policy(name, oracle, {"ranking": "gavel"})
    assert _state(policy) == _state(fresh)
    policy.end_round(snapshot)
    gavel = policy._gavel  # type: ignore[attr-defined]
    assert set(gavel.state.deficits) == {job.id for job in [*snapshot.running, *snapshot.waiting]}
    assert gavel.state.last_reset == NOW
    kept = _state(policy)
    policy.decide(_half(snapshot))
    assert _state(policy) == kept
