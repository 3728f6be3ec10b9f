"""jigsaw contains pollux: with its co-tenancy columns off it decides exactly as pollux (same
objective, restart discount and knowledge); with them on, its objective value is never above
the one pollux's choice reaches (the allocator minimises the summed cost).

Seeded random small clusters and job sets, snapshot by snapshot, and one Pollux-workload
replay decision log against decision log.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import replace
from pathlib import Path

import pytest

from jigsaw.goodput.model import BatchLimits, GoodputModel
from jigsaw.goodput.noise import GradientNoise
from jigsaw.goodput.source import JobGoodput
from jigsaw.goodput.step_time import StepTimeModel
from jigsaw.model.cluster import Cluster, GpuId, Placement
from jigsaw.model.decisions import Decision, Preempt, Replan, Resize, Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies.allocator.solve import solve_exclusive
from jigsaw.policies.jigsaw import JigsawConfig, JigsawPolicy
from jigsaw.policies.pollux import PolluxPolicy
from jigsaw.simulator import SimulationSetup, load_jobs, make_oracle, make_rates, replay
from jigsaw.simulator.semantics import POLLUX
from tests.core.support import FixedSource, running_job

ORACLE = make_oracle(SimulationSetup())
PLANNER = Planner(ORACLE.hardware, catalog=ModelCatalog(ORACLE.profiles))
POLLUX_LIKE = JigsawConfig(
    guests=False,
    hosts=False,
    fairness_power=-1.0,
    service_weight=0.0,
    remaining_weight=0.0,
    promote_s=math.inf,
    launch_s=30.0,
    min_run_s=0.0,
    protect_longest=False,
)
"""jigsaw's objective reduced to Pollux's: its power (-1), no co-tenancy, no attained-service
or work-left weight, no starvation pin, no protection, a first start priced as a restart (as
Pollux's semantics sets it)."""
APPS = Path(__file__).resolve().parents[2] / "data" / "pollux" / "apps"


def _goodput(rng: random.Random, measured: int) -> JobGoodput:
    limits = BatchLimits(64, 4096, 16, 256)
    if measured == 0:
        return JobGoodput(limits, None, 0)
    step = StepTimeModel(
        compute_s=rng.uniform(0.005, 0.05),
        compute_per_sample_s=rng.uniform(1e-4, 2e-3),
        inter_node_s=rng.uniform(0.01, 0.3),
        inter_node_per_replica_s=rng.uniform(1e-3, 0.02),
        intra_node_s=rng.uniform(0.005, 0.05),
        intra_node_per_replica_s=rng.uniform(1e-4, 0.005),
        overlap=rng.uniform(1.0, 3.0),
    )
    noise = GradientNoise.at_batch(rng.uniform(0.1, 2.0), rng.uniform(0.5, 50.0), 64)
    return JobGoodput(limits, GoodputModel(step, noise, limits), measured)


def _world(seed: int, *, host_gang: bool = False) -> tuple[Snapshot, FixedSource]:
    """A random 8- or 16-GPU cluster (nodes of 4) at t = 3,600 s: elastic jobs (some known
    to the source, some measured at up to 4 GPUs) and rigid one- and two-GPU jobs, some
    running on disjoint GPUs, some waiting, some resized or restarted before.

    With ``host_gang``, a rigid 4-GPU resnet50 gang (ImageNet-sized, batch 128) started in
    the last 25 minutes runs on the first node: an SPB staircase of it idles its partial
    ranks long enough for a guest's turn, so co-tenancy can pay (a resnet18 gang's cannot:
    its guests slow it more than they gain). Its work is long; were it not protected
    (``min_run_s``), the exclusive optimum would preempt it for the short jobs, and the
    completion guard rightly prefers that to packing them beside it."""
    rng = random.Random(seed)
    gpus = rng.choice([8, 16])
    cluster = Cluster.uniform(gpus, 4, gpu_memory_bytes=ORACLE.hardware.memory_bytes)
    free: list[GpuId] = list(cluster.gpu_ids())
    now = 3_600.0
    running: list[Job] = []
    waiting: list[Job] = []
    known: dict[str, JobGoodput] = {}
    if host_gang:
        spec = JobSpec("h", "resnet50_224", 4, 10**6, batch_size=128)
        plan = full_backprop(4, ORACLE.num_blocks("resnet50_224"))
        started = now - rng.uniform(60.0, 1_500.0)
        running.append(running_job(spec, tuple(free[:4]), plan, started))
        del free[:4]
    for index in range(rng.randint(2, 9)):
        job_id = f"j{index}"
        elastic = rng.random() < 0.6
        workers = rng.choice([1, 2, 4]) if elastic else rng.choice([1, 1, 2])
        extra = (
            {
                "min_workers": 1,
                "max_workers": 8,
                "batch_policy": "adaptive",
                "min_global_batch": 64,
                "max_global_batch": 4096,
            }
            if elastic
            else {}
        )
        spec = JobSpec(job_id, "resnet18_32", workers, 10**6, batch_size=64, **extra)
        submitted = now - rng.uniform(5.0, 3_000.0)
        if elastic:
            known[job_id] = _goodput(rng, rng.choice([0, 1, 2, 4]))
        size = rng.choice([1, 2, 4]) if elastic else workers
        if rng.random() < 0.6 and len(free) >= size:
            placement: Placement = tuple(sorted(free[:size]))
            del free[:size]
            job = running_job(spec, placement, full_backprop(size, 4), submitted + 1.0)
            job = replace(
                job,
                submitted_at=submitted,
                resizes=rng.choice([0, 0, 1, 3]),
                attempt=rng.choice([1, 1, 2]),
            )
            running.append(job)
        else:
            waiting.append(Job(job_id, spec, submitted_at=submitted))
    return Snapshot(now, cluster, tuple(waiting), tuple(running)), FixedSource(known)


def _without_reasons(decisions: list[Decision]) -> list[tuple[object, ...]]:
    """What a decision does, not what it says: the reasons name the policy."""
    found: list[tuple[object, ...]] = []
    for d in decisions:
        if isinstance(d, Start):
            found.append(("start", d.job_id, d.placement, d.plan, d.worker_batch))
        elif isinstance(d, Resize):
            found.append(("resize", d.job_id, d.placement, d.plan, d.worker_batch))
        elif isinstance(d, Preempt):
            found.append(("preempt", d.job_id))
        elif isinstance(d, Replan):
            found.append(("replan", d.job_id, d.placement, d.plan))
    return found


@pytest.mark.parametrize("seed", range(40))
def test_without_cotenancy_jigsaw_decides_as_pollux(seed: int) -> None:
    snapshot, source = _world(seed)
    pollux = PolluxPolicy(PLANNER, goodput=source).decide(snapshot)
    jigsaw = JigsawPolicy(ORACLE, PLANNER, config=POLLUX_LIKE, goodput=source).decide(snapshot)
    assert _without_reasons(jigsaw) == _without_reasons(pollux)


def test_the_random_worlds_are_not_all_quiet() -> None:
    """The comparison above would pass on worlds where nobody moves; these move."""
    kinds: set[str] = set()
    for seed in range(40):
        snapshot, source = _world(seed)
        decisions = PolluxPolicy(PLANNER, goodput=source).decide(snapshot)
        kinds.update(type(d).__name__ for d in decisions)
    assert {"Start", "Resize", "Preempt"} <= kinds


def _costs_with_and_without_cotenancy(seed: int) -> tuple[float, float]:
    """The objective value jigsaw reaches with guest and host columns, and the exclusive
    optimum of the same problem: the configuration pollux chooses (the test above)."""
    snapshot, source = _world(seed, host_gang=True)
    config = replace(POLLUX_LIKE, guests=True, hosts=True, min_run_s=1_800.0)
    result = JigsawPolicy(ORACLE, PLANNER, config=config, goodput=source).solve_round(snapshot)
    assert result is not None
    return result.solution.cost, solve_exclusive(result.problem).cost


@pytest.mark.parametrize("seed", range(40))
def test_with_cotenancy_the_objective_is_never_worse(seed: int) -> None:
    joint, exclusive = _costs_with_and_without_cotenancy(seed)
    assert joint <= exclusive + 1e-9


def test_cotenancy_lowers_the_objective_in_some_worlds() -> None:
    """Were co-tenancy never taken, the bound above would hold trivially."""
    gains = [e - j for j, e in map(_costs_with_and_without_cotenancy, range(40))]
    assert any(gain > 1e-6 for gain in gains)


# -- one replay, decision log against decision log ---------------------------------------------

ROWS = (
    "cifar10-0,0,cifar10,6,2048\n"
    + "".join(f"cifar10-{i},420,cifar10,4,2048\n" for i in (1, 2, 3))
    + "deepspeech2-4,420,deepspeech2,4,320\nncf-5,420,ncf,1,32768\n"
)


def _log(tmp_path: Path, policy: str, options: dict[str, object]) -> list[str]:
    root = tmp_path / policy / "pollux"
    (root / "workloads").mkdir(parents=True)
    (root / "apps").symlink_to(APPS, target_is_directory=True)
    trace = root / "workloads" / "w.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\n" + ROWS)
    setup = SimulationSetup(
        gpus=16, gpus_per_node=4, keep_log=True, policy_options={policy: options}
    )
    oracle: Oracle = make_oracle(setup)
    rates, arrivals = make_rates(load_jobs(trace, setup, oracle), setup, oracle, trace)
    result = replay(arrivals, policy, rates, oracle, setup, semantics=POLLUX)
    assert result.log.lines is not None
    # The reason, in brackets at the end, names the policy; everything before it must match.
    return [re.sub(r" \(.*\)$", "", line) for line in result.log.lines]


def test_a_pollux_workload_replays_to_the_same_decision_log(tmp_path: Path) -> None:
    pollux = _log(tmp_path, "pollux", {})
    jigsaw = _log(tmp_path, "jigsaw", {"config": POLLUX_LIKE})
    assert len(pollux) > 20 and any(" resize " in line for line in pollux)
    assert jigsaw == pollux
