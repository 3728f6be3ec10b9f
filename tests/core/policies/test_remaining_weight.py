"""``remaining_weight``: a job's weight counts the work it has left, so of two jobs that
could take one free GPU the one closer to its end starts, and only with the weight on."""

from __future__ import annotations

import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies.allocator.objective import Objective
from jigsaw.policies.jigsaw import JigsawConfig, JigsawPolicy
from jigsaw.simulator import SimulationSetup, make_oracle
from tests.core.support import running_job

ORACLE = make_oracle(SimulationSetup())
PLANNER = Planner(ORACLE.hardware, catalog=ModelCatalog(ORACLE.profiles))
NOW = 50_000.0


def _one_free_gpu(long_first: int, short_later: int) -> Snapshot:
    """Three protected one-GPU jobs hold three of four GPUs; two fresh one-GPU jobs wait:
    ``long_first`` iterations submitted first, ``short_later`` a minute after."""
    running = tuple(
        running_job(
            JobSpec(f"r{i}", "resnet18_32", 1, 10**6), ((0, i),), full_backprop(1, 4), NOW - 60
        )
        for i in range(3)
    )
    waiting = (
        Job("long", JobSpec("long", "resnet18_32", 1, long_first), submitted_at=NOW - 120),
        Job("short", JobSpec("short", "resnet18_32", 1, short_later), submitted_at=NOW - 60),
    )
    return Snapshot(NOW, Cluster.uniform(4, 4), waiting, running)


@pytest.mark.parametrize("weight", [0.0, 1.0, 64.0])
def test_the_job_closer_to_its_end_starts_only_with_the_weight_on(weight: float) -> None:
    # The critical path off: the long job's work would make it critical (it isolates the weight).
    config = JigsawConfig(remaining_weight=weight, protect_longest=False)
    policy = JigsawPolicy(ORACLE, PLANNER, config=config)
    started = [d.job_id for d in policy.decide(_one_free_gpu(10**6, 10**3)) if isinstance(d, Start)]
    assert started == (["long"] if weight == 0.0 else ["short"])
    # Equal work: the earlier job, whatever the weight (the program's tie rule).
    started = [d.job_id for d in policy.decide(_one_free_gpu(10**4, 10**4)) if isinstance(d, Start)]
    assert started == ["long"]


def test_the_weight_falls_with_the_work_left_and_not_while_a_job_runs() -> None:
    config = JigsawConfig(remaining_weight=4.0, service_weight=0.0)
    left = {"a": 0.0, "b": 3_600.0, "c": 36_000.0}
    objective = Objective(config, NOW, 8, work_left_s=lambda job: left[job.id])
    weights = [
        objective.weight(Job(name, JobSpec(name, "mlp", 1, 10), submitted_at=0.0))
        for name in ("a", "b", "c")
    ]
    assert weights == pytest.approx([1 + 4.0, 1 + 4.0 * 0.5, 1 + 4.0 / 11])
    # The policy reads the work left when the run began: a running job's weight holds.
    policy = JigsawPolicy(ORACLE, PLANNER, config=config)
    job = running_job(JobSpec("j", "resnet18_32", 1, 10**5), ((0, 0),), full_backprop(1, 4), 0.0)
    early = Objective(config, 100.0, 8, work_left_s=policy._work_left(100.0))
    late = Objective(config, 10_000.0, 8, work_left_s=policy._work_left(10_000.0))
    assert early.weight(job) == late.weight(job) > 1.0
