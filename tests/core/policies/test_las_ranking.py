"""The LAS ranking kept across rounds gives, round after round, what ranking from scratch gives.

A random world evolves between rounds: jobs arrive, start, stop, finish, get cancelled and
get their priority edited, and time runs on (short thresholds and a short starvation floor,
so keys cross often). After every step the kept ranking's order and stability bound must
equal :func:`las_order` and :func:`las_stable_until` on the same jobs.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from jigsaw.model.domain import Job, JobSpec, transition
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import full_backprop
from jigsaw.policies.shared.fairness import LasConfig, las_order, las_stable_until
from jigsaw.policies.speed.las_ranking import LasRanking

TIGHT = LasConfig(thresholds=(600.0, 6_000.0), promote_knob=2.0, promote_floor_s=900.0)


def _start(job: Job, at: float, workers: int) -> Job:
    admitted, _ = transition(
        job,
        JobState.ADMITTED,
        reason="t",
        at=at,
        actor="t",
        placement=tuple((0, g) for g in range(workers)),
        plan=full_backprop(workers, 4),
    )
    return transition(admitted, JobState.RUNNING, reason="t", at=at, actor="t")[0]


def _stop(job: Job, at: float) -> Job:
    return transition(job, JobState.PREEMPTED, reason="t", at=at, actor="t")[0]


def _world_steps(seed: int, steps: int) -> list[tuple[float, list[Job]]]:
    """``steps`` moments of one random world: (now, its active jobs)."""
    rng = random.Random(seed)
    jobs: dict[str, Job] = {}
    now, made = 0.0, 0
    moments = []
    for _ in range(steps):
        now += rng.choice([1.0, 60.0, 60.0, 300.0, 1_000.0 * rng.random()])
        for _ in range(rng.randint(0, 3)):
            made += 1
            workers = rng.choice([1, 1, 2, 4])
            jobs[f"j{made}"] = Job(
                id=f"j{made}",
                submitted_at=now - rng.random() * 50,
                spec=JobSpec(
                    name="j",
                    model="mlp",
                    workers=workers,
                    iterations=100,
                    priority=rng.choice([0, 0, 0, 1, -1]),
                ),
            )
        for job_id in rng.sample(sorted(jobs), k=min(len(jobs), rng.randint(0, 4))):
            job = jobs[job_id]
            action = rng.random()
            if action < 0.15:
                del jobs[job_id]  # finished, cancelled or failed: gone from the snapshot
            elif action < 0.3:
                # Edited in place (the service allows a priority change): a new object.
                spec = replace(job.spec, priority=rng.choice([-1, 0, 2]))
                jobs[job_id] = replace(job, spec=spec, version=job.version + 1)
            elif job.state is JobState.RUNNING:
                jobs[job_id] = _stop(job, now)
            else:
                jobs[job_id] = _start(job, now, job.spec.workers)
        moments.append((now, list(jobs.values())))
    return moments


@pytest.mark.parametrize("config", [TIGHT, LasConfig()], ids=["tight", "defaults"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kept_ranking_equals_ranking_from_scratch(config: LasConfig, seed: int) -> None:
    ranking = LasRanking(config)
    from_scratch_keys = 0
    for now, jobs in _world_steps(seed, 400):
        rng = random.Random(int(now))
        rng.shuffle(jobs)  # the snapshot's order must not matter
        expected = [job.id for job in las_order(jobs, now, config)]
        assert [job.id for job in ranking.order(jobs, now)] == expected
        assert ranking.stable_until(jobs, now) == las_stable_until(jobs, now, config)
        from_scratch_keys += len(jobs)
    # Were every key recomputed each round, the equality above would hold trivially.
    assert ranking.rekeyed < from_scratch_keys / 3


def test_ranking_returns_the_snapshots_own_job_objects() -> None:
    """A record that changed in a field the key does not read keeps its key, but the round
    must see the new record (its placement, its plan), never the cached one."""
    job = Job(
        id="a", submitted_at=0.0, spec=JobSpec(name="a", model="mlp", workers=1, iterations=10)
    )
    ranking = LasRanking(LasConfig())
    assert ranking.order([job], 10.0)[0] is job
    progressed = replace(job, iterations_done=5.0, version=1)
    assert ranking.order([progressed], 20.0)[0] is progressed


def test_time_going_back_rebuilds() -> None:
    """A snapshot older than the last one (another world, a restarted leader) is ranked from
    scratch: cached keys hold only forward in time."""
    config = LasConfig(thresholds=(100.0,), promote_floor_s=10_000.0)
    job = _start(
        Job(
            id="a", submitted_at=0.0, spec=JobSpec(name="a", model="mlp", workers=1, iterations=10)
        ),
        0.0,
        1,
    )
    other = Job(
        id="b", submitted_at=1.0, spec=JobSpec(name="b", model="mlp", workers=1, iterations=10)
    )
    ranking = LasRanking(config)
    assert [j.id for j in ranking.order([job, other], 500.0)] == ["b", "a"]  # a demoted
    assert [j.id for j in ranking.order([job, other], 50.0)] == ["a", "b"]
    assert [j.id for j in ranking.order([job, other], 50.0)] == [
        j.id for j in las_order([job, other], 50.0, config)
    ]
