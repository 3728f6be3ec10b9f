from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from jigsaw.model.domain import Job, JobSpec, transition
from jigsaw.model.errors import IllegalTransitionError
from jigsaw.model.lifecycle import (
    TRANSITIONS,
    JobState,
    can_transition,
    cancellable_states,
    sources_of,
)


def make_job(state: JobState = JobState.PENDING) -> Job:
    spec = JobSpec(name="a", model="mlp", workers=2, iterations=10)
    return Job(id="j-1", spec=spec, submitted_at=0.0, state=state)


def test_terminal_states_have_no_exits() -> None:
    for state in JobState:
        assert state.is_terminal == (not TRANSITIONS[state])


def test_cancel_reachable_from_every_non_terminal_state() -> None:
    assert cancellable_states() == {s for s in JobState if not s.is_terminal}


def test_documented_happy_path_is_legal() -> None:
    path = [
        JobState.PENDING,
        JobState.ADMITTED,
        JobState.RUNNING,
        JobState.PREEMPTED,
        JobState.ADMITTED,
        JobState.RUNNING,
        JobState.SUCCEEDED,
    ]
    for source, target in itertools.pairwise(path):
        assert can_transition(source, target), (source, target)


@pytest.mark.parametrize(
    "source,target",
    [
        (JobState.PENDING, JobState.RUNNING),
        (JobState.SUCCEEDED, JobState.RUNNING),
        (JobState.CANCELLED, JobState.PENDING),
        (JobState.PREEMPTED, JobState.SUCCEEDED),
    ],
)
def test_illegal_transition_rejected_with_reason(source: JobState, target: JobState) -> None:
    with pytest.raises(IllegalTransitionError, match=f"cannot go from {source} to {target}"):
        transition(make_job(source), target, reason="test", at=1.0, actor="t")


def test_sources_of_is_inverse_of_table() -> None:
    for target in JobState:
        for source in JobState:
            assert (source in sources_of(target)) == can_transition(source, target)


def test_run_interval_accounting() -> None:
    job = make_job(JobState.ADMITTED)
    job = job.__class__(
        **{**{f: getattr(job, f) for f in job.__dataclass_fields__}, "placement": ((0, 0), (0, 1))}
    )
    running, event = transition(job, JobState.RUNNING, reason="up", at=10.0, actor="executor")
    assert event.from_state == JobState.ADMITTED and event.reason == "up"
    assert running.started_at == 10.0 and running.run_started_at == 10.0
    assert running.attained_service(15.0) == pytest.approx(10.0)
    preempted, _ = transition(running, JobState.PREEMPTED, reason="room", at=20.0, actor="s")
    assert preempted.attained_gpu_seconds == pytest.approx(20.0)
    assert preempted.placement == () and preempted.preemptions == 1
    assert preempted.attained_service(100.0) == pytest.approx(20.0)


def test_a_decision_stamped_before_the_submission_happens_at_the_submission() -> None:
    """The service stamps a round's decisions with the time the round began; a job submitted
    while the round read the store must not be admitted before it was submitted."""
    job = replace(make_job(JobState.PENDING), submitted_at=50.0)
    admitted, event = transition(job, JobState.ADMITTED, reason="fits", at=49.2, actor="s")
    assert event.at == 50.0
    running, _ = transition(admitted, JobState.RUNNING, reason="up", at=49.5, actor="executor")
    assert running.started_at == 50.0 and running.run_started_at == 50.0
    _, event = transition(job, JobState.ADMITTED, reason="fits", at=51.0, actor="s")
    assert event.at == 51.0
