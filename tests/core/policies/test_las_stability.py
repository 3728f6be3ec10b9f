"""The LAS ranking used every round, and the bound on how long it stays put.

``las_order`` sorts by ``las_key``: both must agree. ``las_stable_until`` promises
that no job's key changes before it (while no job changes state); the simulator skips
rounds on that promise, so it is checked here on random jobs at many later moments.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from jigsaw.model.domain import Job, JobSpec, transition
from jigsaw.model.lifecycle import JobState
from jigsaw.policies.shared.fairness import LasConfig, las_key, las_order, las_stable_until

CONFIGS = st.builds(
    LasConfig,
    thresholds=st.sampled_from([(3_600.0, 36_000.0), (600.0, 6_000.0), (100.0,)]),
    promote_knob=st.sampled_from([0.5, 2.0, 8.0]),
    promote_floor_s=st.sampled_from([0.0, 900.0, 3_600.0]),
)


@st.composite
def jobs(draw: st.DrawFn, now: float) -> Job:
    workers = draw(st.integers(1, 8))
    job = Job(
        id=f"j{draw(st.integers(0, 10**6))}",
        spec=JobSpec(
            name="j",
            model="mlp",
            workers=workers,
            iterations=100,
            priority=draw(st.integers(-2, 2)),
        ),
        submitted_at=now - draw(st.floats(0.0, 50_000.0)),
        attained_gpu_seconds=draw(st.floats(0.0, 80_000.0)),
    )
    if draw(st.booleans()):
        since = draw(st.floats(job.submitted_at, now))
        admitted, _ = transition(
            job,
            JobState.ADMITTED,
            reason="t",
            at=since,
            actor="t",
            placement=((0, 0),) * workers,
            plan=(0,) * workers,
        )
        job, _ = transition(admitted, JobState.RUNNING, reason="t", at=since, actor="t")
    return job


NOW = 100_000.0


@settings(max_examples=200, deadline=None)
@given(
    config=CONFIGS,
    population=st.lists(jobs(NOW), min_size=1, max_size=30, unique_by=lambda j: j.id),
)
def test_las_order_sorts_by_las_key(config: LasConfig, population: list[Job]) -> None:
    expected = sorted(population, key=lambda job: las_key(job, NOW, config))
    assert [j.id for j in las_order(population, NOW, config)] == [j.id for j in expected]


@settings(max_examples=200, deadline=None)
@given(
    config=CONFIGS,
    population=st.lists(jobs(NOW), min_size=1, max_size=20, unique_by=lambda j: j.id),
    fractions=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=20),
)
def test_no_las_key_changes_before_the_stable_time(
    config: LasConfig, population: list[Job], fractions: list[float]
) -> None:
    until = las_stable_until(population, NOW, config)
    assert until >= NOW
    horizon = until if math.isfinite(until) else NOW + 10**6
    before = [las_key(job, NOW, config) for job in population]
    for fraction in fractions:
        # Strictly before the bound (a key may flip exactly at it), with float slack.
        moment = NOW + fraction * (horizon - NOW) * (1 - 1e-9) - 1e-6
        moment = max(moment, NOW)
        assert [las_key(job, moment, config) for job in population] == before


def test_the_stable_time_is_the_next_threshold_crossing() -> None:
    config = LasConfig(thresholds=(3_600.0, 36_000.0), promote_floor_s=10**9)
    spec = JobSpec(name="a", model="mlp", workers=2, iterations=10)
    job = Job(id="a", spec=spec, submitted_at=0.0)
    admitted, _ = transition(
        job,
        JobState.ADMITTED,
        reason="t",
        at=0.0,
        actor="t",
        placement=((0, 0), (0, 1)),
        plan=(0, 0),
    )
    run, _ = transition(admitted, JobState.RUNNING, reason="t", at=0.0, actor="t")
    # Two GPUs: 3,600 GPU-seconds after 1,800 s; the next crossing after that at 18,000 s.
    assert las_stable_until([run], 100.0, config) == 1_800.0
    assert las_stable_until([run], 2_000.0, config) == 18_000.0
