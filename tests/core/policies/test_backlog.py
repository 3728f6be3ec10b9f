"""The backlog split: the fresh rigid jobs a round leaves out are ones it would leave waiting.

A round of pollux or jigsaw that sets the backlog aside (the default) must decide exactly
what the same round decides with every waiting job priced. jigsaw prices every job when its
starvation pin is on (a finite ``promote_s``; at 10^15 s nobody starves, so nothing else
changes), and jigsaw with pollux's objective decides as pollux
(test_allocator_containment.py): those are the references. The worlds are deep backlogs on
small clusters: many never-run rigid jobs of one, two and four GPUs and two priorities, some
sharing a submission time, behind running jobs and jobs that ran before.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import replace

import pytest

from jigsaw.goodput.source import JobGoodput
from jigsaw.model.cluster import Cluster, GpuId, Placement
from jigsaw.model.decisions import Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.allocator.guest_candidates import MAX_GUESTS
from jigsaw.policies.jigsaw import JigsawConfig, JigsawPolicy
from jigsaw.policies.pollux import PolluxPolicy
from jigsaw.policies.shared.backlog import split_backlog
from tests.core.policies.test_allocator_containment import (
    ORACLE,
    PLANNER,
    POLLUX_LIKE,
    _goodput,
    _without_reasons,
)
from tests.core.support import FixedSource, running_job

EVERY_JOB_PRICED = 1e15
"""A starvation pin nobody reaches: jigsaw then prices every waiting job."""


def _backlog_world(
    seed: int, *, priorities: bool = True, varied_work: bool = False
) -> tuple[Snapshot, FixedSource]:
    """``priorities``: some jobs have priority 2 (pollux reads no priority, so its worlds
    have none); ``varied_work``: waiting jobs ask for 10^3 to 10^6 iterations (drawn apart,
    so the worlds are otherwise the same)."""
    rng = random.Random(seed)
    work = random.Random(seed + 10_000)
    gpus = rng.choice([8, 16])
    cluster = Cluster.uniform(gpus, 4, gpu_memory_bytes=ORACLE.hardware.memory_bytes)
    free: list[GpuId] = list(cluster.gpu_ids())
    now = 7_200.0
    running: list[Job] = []
    waiting: list[Job] = []
    known = {}
    for index in range(rng.randint(1, 4)):
        size = rng.choice([1, 2, 4])
        if len(free) < size:
            break
        spec = JobSpec(f"r{index}", "resnet18_32", size, 10**6, batch_size=64)
        placement: Placement = tuple(sorted(free[:size]))
        del free[:size]
        started = now - rng.uniform(60.0, 4_000.0)
        running.append(running_job(spec, placement, full_backprop(size, 4), started))
    stamps = [now - rng.uniform(10.0, 6_000.0) for _ in range(rng.randint(30, 90))]
    stamps += rng.sample(stamps, len(stamps) // 4)  # some jobs arrive together
    for index, submitted in enumerate(stamps):
        job_id = f"w{index:03d}"
        kind = rng.random()
        if kind < 0.1:  # elastic, known to the source: never set aside
            extra = {
                "min_workers": 1,
                "max_workers": 4,
                "batch_policy": "adaptive",
                "min_global_batch": 64,
                "max_global_batch": 4096,
            }
            spec = JobSpec(job_id, "resnet18_32", 1, 10**6, batch_size=64, **extra)
            known[job_id] = _goodput(rng, rng.choice([0, 1, 2]))
            waiting.append(Job(job_id, spec, submitted_at=submitted))
            continue
        priority = rng.choice([0, 0, 0, 2]) if priorities else 0
        iterations = work.choice([10**3, 10**4, 10**5, 10**6]) if varied_work else 10**6
        spec = JobSpec(
            job_id,
            "resnet18_32",
            rng.choice([1, 1, 2, 4]),
            iterations,
            batch_size=64,
            priority=priority,
        )
        job = Job(job_id, spec, submitted_at=submitted)
        if kind < 0.25:  # ran before and was preempted: priced by its own history
            job = replace(job, attempt=1, attained_gpu_seconds=rng.uniform(60.0, 3_000.0))
        waiting.append(job)
    waiting.sort(key=lambda job: (job.submitted_at, job.id))  # the snapshot's arrival order
    return Snapshot(now, cluster, tuple(waiting), tuple(running)), FixedSource(known)


def _known_to(source: FixedSource) -> Callable[[Job], JobGoodput | None]:
    return lambda job: source.job_goodput(job, 0.0)


@pytest.mark.parametrize("seed", range(30))
def test_jigsaw_decides_as_with_every_waiting_job_priced(seed: int) -> None:
    snapshot, source = _backlog_world(seed)
    for config in (JigsawConfig(), JigsawConfig(guests=False), POLLUX_LIKE):
        split = JigsawPolicy(ORACLE, PLANNER, config=config, goodput=source)
        every = replace(config, promote_s=EVERY_JOB_PRICED)
        reference = JigsawPolicy(ORACLE, PLANNER, config=every, goodput=source)
        assert _without_reasons(split.decide(snapshot)) == _without_reasons(
            reference.decide(snapshot)
        )


SHORTEST_FIRST = JigsawConfig(remaining_weight=64.0)


@pytest.mark.parametrize("seed", range(30))
def test_shortest_first_decides_as_with_every_waiting_job_priced(seed: int) -> None:
    """With ``remaining_weight`` fresh jobs of one class weigh what their work left makes
    them: each class keeps its heaviest, and the objective counts each job set aside at its
    own price."""
    snapshot, source = _backlog_world(seed, varied_work=True)
    for config in (SHORTEST_FIRST, replace(SHORTEST_FIRST, guests=False)):
        split = JigsawPolicy(ORACLE, PLANNER, config=config, goodput=source).solve_round(snapshot)
        every = replace(config, promote_s=EVERY_JOB_PRICED)
        reference = JigsawPolicy(ORACLE, PLANNER, config=every, goodput=source)
        whole = reference.solve_round(snapshot)
        assert split is not None and whole is not None
        assert split.solution.cost == pytest.approx(whole.solution.cost, rel=1e-12)
        policy = JigsawPolicy(ORACLE, PLANNER, config=config, goodput=source)
        assert _without_reasons(policy.decide(snapshot)) == _without_reasons(
            reference.decide(snapshot)
        )


def test_shortest_first_worlds_set_jobs_aside_out_of_arrival_order() -> None:
    """Were nothing set aside, or every class's kept jobs its earliest, the comparison above
    could not tell a weight-ranked split from an arrival-ordered one."""
    aside = out_of_order = 0
    for seed in range(30):
        snapshot, source = _backlog_world(seed, varied_work=True)
        policy = JigsawPolicy(ORACLE, PLANNER, config=SHORTEST_FIRST, goodput=source)
        result = policy.solve_round(snapshot)
        assert result is not None
        priced = {view.job.id for view in result.problem.views}
        left_out = [job for job in snapshot.waiting if job.id not in priced]
        aside += len(left_out)
        plain = split_backlog(  # jigsaw's split, less the ranking: arrival order
            snapshot.waiting,
            _known_to(source),
            snapshot.cluster.num_gpus,
            class_of=lambda job: job.spec.priority,
            quota_of=lambda size: MAX_GUESTS if size == 1 else 0,
        )
        out_of_order += {j.id for j in plain.waiting} != {
            j.id for j in snapshot.waiting if j.id in priced
        }
    assert aside > 0 and out_of_order > 0


@pytest.mark.parametrize("seed", range(30))
def test_jigsaw_reaches_the_objective_value_of_every_job_priced(seed: int) -> None:
    """The jobs set aside still count in the objective (at their waiting price): HiGHS's
    relative gap, and the test that keeps its answer over the exclusive one, read the same
    totals as in a round over every job."""
    snapshot, source = _backlog_world(seed)
    split = JigsawPolicy(ORACLE, PLANNER, goodput=source).solve_round(snapshot)
    every = JigsawConfig(promote_s=EVERY_JOB_PRICED)
    reference = JigsawPolicy(ORACLE, PLANNER, config=every, goodput=source).solve_round(snapshot)
    assert split is not None and reference is not None
    assert split.solution.cost == pytest.approx(reference.solution.cost, rel=1e-12)
    assert len(split.problem.views) <= len(reference.problem.views)


@pytest.mark.parametrize("seed", range(30))
def test_pollux_decides_as_with_every_waiting_job_priced(seed: int) -> None:
    snapshot, source = _backlog_world(seed, priorities=False)
    every = replace(POLLUX_LIKE, promote_s=EVERY_JOB_PRICED)
    reference = JigsawPolicy(ORACLE, PLANNER, config=every, goodput=source).decide(snapshot)
    pollux = PolluxPolicy(PLANNER, goodput=source).decide(snapshot)
    assert _without_reasons(pollux) == _without_reasons(reference)


def test_the_worlds_set_jobs_aside_and_start_some() -> None:
    """Were nothing set aside, or nobody started, the comparisons above could not fail."""
    aside = started = 0
    for seed in range(30):
        snapshot, source = _backlog_world(seed)
        capacity = snapshot.cluster.num_gpus
        backlog = split_backlog(snapshot.waiting, _known_to(source), capacity)
        aside += backlog.set_aside
        decisions = JigsawPolicy(ORACLE, PLANNER, goodput=source).decide(snapshot)
        started += sum(type(d).__name__ == "Start" for d in decisions)
    assert aside > 200 and started > 30


def test_a_fresh_job_behind_its_class_quota_is_set_aside_and_no_other() -> None:
    """Four GPUs: four one-GPU jobs of a class can run, so the fifth waits; a job of another
    priority, one that ran before, and one the source knows are kept wherever they are."""
    spec = JobSpec("x", "resnet18_32", 1, 1_000, batch_size=64)
    fresh = [Job(f"f{i}", replace(spec, name=f"f{i}"), submitted_at=float(i)) for i in range(6)]
    urgent = Job("u", replace(spec, name="u", priority=3), submitted_at=10.0)
    ran = replace(Job("r", replace(spec, name="r"), submitted_at=11.0), attempt=1)
    known = Job("k", replace(spec, name="k"), submitted_at=12.0)
    waiting = [*fresh, urgent, ran, known]
    source = FixedSource({"k": _goodput(random.Random(0), 1)})
    backlog = split_backlog(
        waiting,
        lambda job: source.job_goodput(job, 0.0),
        4,
        class_of=lambda job: job.spec.priority,
    )
    assert [job.id for job in backlog.waiting] == ["f0", "f1", "f2", "f3", "u", "r", "k"]
    assert backlog.set_aside == 2
    assert backlog.goodputs[-1] is not None and backlog.goodputs[0] is None
    quota = split_backlog(
        waiting,
        lambda job: source.job_goodput(job, 0.0),
        4,
        class_of=lambda job: job.spec.priority,
        quota_of=lambda size: 5,
    )
    assert quota.set_aside == 1  # f5 only
    classless = split_backlog(waiting, lambda job: source.job_goodput(job, 0.0), 4)
    assert [job.id for job in classless.waiting] == ["f0", "f1", "f2", "f3", "r", "k"]
    assert math.isinf(JigsawConfig().promote_s)  # the default round splits its backlog


def test_guest_candidates_behind_the_gpu_quota_are_kept() -> None:
    """A full 8-GPU cluster whose protected jobs let no waiting job start on GPUs of its own.
    Eight large one-GPU jobs wait ahead of six small ones: only the small ones fit beside the
    resnet50 gang as guests, and they are behind the eight a GPU quota alone would keep. The
    guest candidates' quota keeps them, so the gang still makes room for three of them."""
    now = 7_200.0
    cluster = Cluster.uniform(8, 4, gpu_memory_bytes=ORACLE.hardware.memory_bytes)
    gpus = list(cluster.gpu_ids())
    blocks = ORACLE.num_blocks("resnet50_224")
    spec = JobSpec("h", "resnet50_224", 4, 10**6, batch_size=128)
    running = [running_job(spec, tuple(gpus[:4]), full_backprop(4, blocks), now - 600.0)]
    for i in range(4):
        spec = JobSpec(f"o{i}", "resnet18_32", 1, 10**6, batch_size=64)
        running.append(running_job(spec, (gpus[4 + i],), full_backprop(1, 4), now - 600.0))
    waiting = [
        Job(f"b{i}", JobSpec(f"b{i}", "vgg16_224", 1, 10**4, batch_size=128), submitted_at=i)
        for i in range(8)
    ]
    waiting += [
        Job(f"s{i}", JobSpec(f"s{i}", "digits_cnn", 1, 10**3, batch_size=32), submitted_at=10 + i)
        for i in range(6)
    ]
    snapshot = Snapshot(now, cluster, tuple(waiting), tuple(running))
    source = FixedSource({})
    split = JigsawPolicy(ORACLE, PLANNER, goodput=source).decide(snapshot)
    every = JigsawConfig(promote_s=EVERY_JOB_PRICED)
    reference = JigsawPolicy(ORACLE, PLANNER, config=every, goodput=source).decide(snapshot)
    assert _without_reasons(split) == _without_reasons(reference)
    packed = [d.job_id for d in split if isinstance(d, Start)]
    assert len(packed) == 3 and all(job_id.startswith("s") for job_id in packed)
