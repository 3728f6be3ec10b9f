"""What a running gang offers co-tenancy is kept from round to round
(:mod:`jigsaw.policies.allocator.gang_offers`); the decisions must be the ones a policy that
reads every offer afresh (``incremental=False``) and a fresh policy take, whatever the gang
did in between: switched plan, moved, measured its own eta."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from jigsaw.model.block_noise import BlockNoise
from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Decision, Replan, Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import Plan, SPBPlan, full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies.allocator.gang_offers import GangOfferMemo
from jigsaw.policies.jigsaw import JigsawPolicy
from jigsaw.simulator import SimulationSetup, load_jobs, make_oracle, make_rates, replay
from tests.core.support import running_job

ORACLE = make_oracle(SimulationSetup())
PLANNER = Planner(ORACLE.hardware, catalog=ModelCatalog(ORACLE.profiles))
DATA = Path(__file__).resolve().parents[2] / "data"
NOW = 3_600.0
NODE0 = ((0, 0), (0, 1), (0, 2), (0, 3))
NODE1 = ((1, 0), (1, 1), (1, 2), (1, 3))


def _full(workers: int) -> SPBPlan:
    return full_backprop(workers, ORACLE.num_blocks("resnet50_224"))


STAIRCASE = replace(_full(4), depths=(0, 3, 3, 3))


def _world(plan: Plan, placement: tuple[tuple[int, int], ...], *, guests: int = 3) -> Snapshot:
    """A 4-worker ``spb: auto`` resnet50 gang (as the pinned staircase of
    test_allocator_decisions.py) and ``guests`` waiting one-worker jobs, on two nodes of
    four GPUs with the other node full of rigid one-GPU jobs."""
    spec = JobSpec("host", "resnet50_224", 4, 10**6, batch_size=128)
    host = running_job(spec, placement, plan, NOW - 600.0)
    other = NODE1 if placement == NODE0 else NODE0
    fillers = tuple(
        running_job(
            JobSpec(f"f{i}", "resnet18_32", 1, 10**6, batch_size=32),
            (gpu,),
            full_backprop(1, ORACLE.num_blocks("resnet18_32")),
            NOW - 600.0,
        )
        for i, gpu in enumerate(other)
    )
    waiting = tuple(
        Job(f"g{i}", JobSpec(f"g{i}", "resnet18_32", 1, 10**5, batch_size=32), NOW - 600.0)
        for i in range(guests)
    )
    cluster = Cluster.uniform(8, 4, gpu_memory_bytes=ORACLE.hardware.memory_bytes)
    return Snapshot(NOW, cluster, waiting, (host, *fillers))


def _measured(snapshot: Snapshot) -> Snapshot:
    """The host has measured its own gradient noise (its eta is now online, not the
    model's): its options, and so its offers, are priced anew."""
    host, *others = snapshot.running
    noise = tuple(BlockNoise(block, 4.0, 9.0, 128, 50, 100, 4) for block in range(1, 5))
    return replace(snapshot, running=(replace(host, block_noise=noise), *others))


def _fresh(snapshot: Snapshot) -> list[Decision]:
    return JigsawPolicy(ORACLE, PLANNER).decide(snapshot)


def test_kept_offers_decide_as_a_fresh_policy_whatever_the_gang_did() -> None:
    kept = JigsawPolicy(ORACLE, PLANNER)
    afresh = JigsawPolicy(ORACLE, PLANNER, incremental=False)
    worlds = [
        _world(_full(4), NODE0),
        _world(_full(4), NODE0),  # the same gang again: its offers are read, not built
        _world(STAIRCASE, NODE0),  # it switched to the staircase in place
        _world(STAIRCASE, NODE1),  # it moved
        _measured(_world(STAIRCASE, NODE1)),  # it measured its own eta
        _world(STAIRCASE, NODE1, guests=0),  # nobody left to pack: back to full backprop
        _world(_full(4), NODE0),
    ]
    seen: list[list[Decision]] = []
    for world in worlds:
        decisions = kept.decide(world)
        assert decisions == _fresh(world) == afresh.decide(world)
        seen.append(decisions)
    # The offers matter to these rounds: the first packs three guests on a staircase, the
    # third keeps them there, and a staircase with nobody left goes back to full backprop.
    assert isinstance(seen[0][0], Replan) and sum(isinstance(d, Start) for d in seen[0]) == 3
    assert seen[1] == seen[0]
    assert any(isinstance(d, Replan) and "back to full backprop" in d.reason for d in seen[5])
    # Each gang's offers were built once per (options, plan, GPUs): the repeated world and
    # the fillers, running on throughout, were read from the memo.
    assert kept._offers.built < afresh._offers.built


def test_the_memo_forgets_gangs_gone_once_it_outgrows_the_running_set() -> None:
    catalog = JigsawPolicy(ORACLE, PLANNER).catalog
    memo = GangOfferMemo(catalog, hosts=True, host_keep=0.5)
    world = _world(_full(4), NODE0)
    host = world.running[0]
    for index in range(200):
        memo.offers(replace(host, id=f"gone{index}"), _full(4), NODE0)
    assert catalog.cached_footprints >= 200
    memo.forget_unless([host])
    assert memo.kept == 0
    assert catalog.cached_footprints == 0  # the catalog's footprints of them go too
    memo.offers(host, _full(4), NODE0)
    memo.forget_unless([host])
    assert memo.kept == 1


def test_a_philly_slice_decides_the_same_with_offers_kept() -> None:
    logs = []
    for incremental in (True, False):
        setup = SimulationSetup(
            gpus=8,
            gpus_per_node=4,
            seed=3,
            keep_log=True,
            policy_options={"jigsaw": {"incremental": incremental}},
        )
        oracle = make_oracle(setup)
        jobs = load_jobs(DATA / "philly_excerpt.csv", setup, oracle)
        rates, arrivals = make_rates(jobs, setup, oracle)
        logs.append(replay(arrivals, "jigsaw", rates, oracle, setup).log.lines)
    assert logs[0] is not None and len(logs[0]) >= 40
    assert logs[0] == logs[1]
