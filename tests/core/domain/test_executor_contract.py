"""Every simulated executor answers the Executor seam alike: a resize or a re-plan of a job
with no gang (never started, or stopped) is refused with ``ReplanRefused``, and changes
nothing, not even a stopped job's checkpoint; the cycle then records nothing. The Ray
executor runs the same cases in tests/runtime/test_ray_executor_contract.py."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from jigsaw.model.decisions import Decision, Resize
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.base import PolicyBase
from jigsaw.scheduling.clock import VirtualClock
from jigsaw.simulator.rate_executor import ConstantRate, RateDrivenExecutor
from jigsaw.simulator.rates import OverheadModel
from jigsaw.simulator.replay_executor import ReplayExecutor
from tests.core.executor_contract import (
    TWO_GPUS,
    replan_without_a_gang_is_refused,
    resize_without_a_gang_is_refused,
)
from tests.core.support import setup, submit

EXECUTORS: dict[str, Callable[[VirtualClock], RateDrivenExecutor]] = {
    "rate": lambda _clock: RateDrivenExecutor(ConstantRate(10.0, 0.0)),
    "replay": lambda clock: ReplayExecutor(ConstantRate(10.0, 0.0), OverheadModel(), clock),
}


@pytest.mark.parametrize("kind", sorted(EXECUTORS))
def test_a_job_never_started_cannot_be_resized_or_replanned(kind: str) -> None:
    executor = EXECUTORS[kind](VirtualClock())
    resize_without_a_gang_is_refused(executor, "ghost")
    replan_without_a_gang_is_refused(executor, "ghost")


@pytest.mark.parametrize("kind", sorted(EXECUTORS))
def test_a_stopped_job_cannot_be_resized_and_keeps_its_checkpoint(kind: str) -> None:
    store, clock, _executor, _cycle = setup()
    job = submit(store, "a", workers=2, iterations=1_000, at=0.0)
    other = submit(store, "b", workers=2, iterations=1_000, at=0.0)
    executor = EXECUTORS[kind](clock)
    executor.start(job, TWO_GPUS, full_backprop(2, 4))
    executor.start(other, ((1, 0), (1, 1)), full_backprop(2, 4))
    clock.advance_to(2.0)
    executor.poll(2.0)
    executor.stop("a", checkpoint=True)
    kept = dict(getattr(executor, "checkpoints", {}))
    resize_without_a_gang_is_refused(executor, "a")
    assert executor.running_jobs() == {"b"}
    assert getattr(executor, "checkpoints", {}) == kept


class ShrinkEveryRunningJobLosingItsGang(PolicyBase):
    """Test policy: shrink every running job to one worker; the executor loses each gang
    while the policy decides (as a Ray gang can end on its own thread at any moment between
    the snapshot and the apply)."""

    name = "test-resize-lost"

    def __init__(self, executor: RateDrivenExecutor) -> None:
        self.executor = executor

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        for job in snapshot.running:
            self.executor.stop(job.id, checkpoint=False)
        return [
            Resize(job.id, job.placement[:1], full_backprop(1, 4), 64, "test: shrink")
            for job in snapshot.running
        ]


def test_the_cycle_records_nothing_when_the_gang_to_resize_is_gone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, clock, executor, cycle = setup()
    submit(store, "a", workers=2, iterations=1_000, at=0.0)
    cycle.run_once()
    clock.advance_to(1.0)
    cycle.run_once()
    before = store.get("a")
    assert before.state is JobState.RUNNING
    decided: list[Decision] = []
    cycle.on_decision = lambda _at, decision: decided.append(decision)
    cycle.policy = ShrinkEveryRunningJobLosingItsGang(executor)
    clock.advance_to(5.0)
    with caplog.at_level(logging.WARNING, logger="jigsaw.scheduling.cycle"):
        report = cycle.run_once()
    assert (report.applied, report.skipped) == (0, 1)
    assert decided == []
    assert store.get("a") == before  # same size, batch, resize count and version; no event
    assert store.get("a").resizes == 0
    assert "resize of a refused, nothing recorded" in caplog.text
    assert "has no gang to resize" in caplog.text
