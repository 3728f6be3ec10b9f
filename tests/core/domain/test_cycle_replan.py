"""A re-plan or a resize is recorded only once the executor has taken it: the cycle asks the
executor first, and a refusal (the gang is gone, or cannot take the plan or the size) leaves
the job as it was."""

from __future__ import annotations

import logging

import pytest

from jigsaw.model.decisions import Decision, Replan, Resize
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import SPBPlan, full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.base import PolicyBase
from jigsaw.scheduling.seams import ReplanRefused
from jigsaw.simulator.rate_executor import ConstantRate, RateDrivenExecutor
from jigsaw.simulator.rates import OverheadModel
from jigsaw.simulator.replay_executor import ReplayExecutor
from tests.core.support import setup, submit

NEW_PLAN = SPBPlan((0, 3), 4)


class ReplanEveryRunningJob(PolicyBase):
    """Test policy: move every running job to NEW_PLAN on the GPUs it holds. With
    ``lose_gangs`` set, the executor loses each gang while the policy decides (as a Ray gang
    can end on its own thread at any moment between the snapshot and the apply)."""

    name = "test-replan"

    def __init__(self, lose_gangs: RateDrivenExecutor | None = None) -> None:
        self.lose_gangs = lose_gangs

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        decisions: list[Decision] = []
        for job in snapshot.running:
            if self.lose_gangs is not None:
                self.lose_gangs.stop(job.id, checkpoint=False)
            decisions.append(Replan(job.id, NEW_PLAN, job.placement, "test: new plan"))
        return decisions


def _running_job() -> tuple:
    store, clock, executor, cycle = setup()
    submit(store, "a", workers=2, iterations=1000, at=0.0)
    cycle.run_once()
    clock.advance_to(1.0)
    cycle.run_once()
    job = store.get("a")
    assert job.state == JobState.RUNNING and job.plan != NEW_PLAN
    decided: list[Decision] = []
    cycle.on_decision = lambda _at, decision: decided.append(decision)
    return store, clock, executor, cycle, decided


def test_an_accepted_replan_is_recorded_with_its_time() -> None:
    store, clock, executor, cycle, decided = _running_job()
    cycle.policy = ReplanEveryRunningJob()
    clock.advance_to(5.0)
    report = cycle.run_once()
    assert (report.applied, report.skipped) == (1, 0)
    job = store.get("a")
    assert job.plan == NEW_PLAN and job.plan_changed_at == 5.0
    assert job.reason == "test: new plan"
    assert [d.job_id for d in decided] == ["a"]
    assert executor.running_jobs() == {"a"}


def test_a_replan_of_a_gang_that_is_gone_is_not_recorded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, clock, executor, cycle, decided = _running_job()
    before = store.get("a")
    cycle.policy = ReplanEveryRunningJob(lose_gangs=executor)
    clock.advance_to(5.0)
    with caplog.at_level(logging.WARNING, logger="jigsaw.scheduling.cycle"):
        report = cycle.run_once()
    assert (report.applied, report.skipped) == (0, 1)
    assert decided == []
    assert store.get("a") == before  # same plan, same version, no re-plan time
    assert before.plan_changed_at is None
    assert "re-plan of a refused, nothing recorded" in caplog.text
    assert "has no gang to re-plan" in caplog.text
    # The next round finds the gang missing and retries the job under the plan it recorded.
    cycle.policy = ReplanEveryRunningJob()
    cycle.run_once()
    lost = store.get("a")
    assert lost.state == JobState.RETRYING and lost.plan == before.plan


def test_the_replay_executor_refuses_a_gone_gang_and_keeps_its_checkpoint() -> None:
    store, clock, _executor, _cycle = setup()
    job = submit(store, "a", workers=2, iterations=1000, at=0.0)
    replay = ReplayExecutor(ConstantRate(10.0, 0.0), OverheadModel(), clock)
    placement = ((0, 0), (0, 1))
    replay.start(job, placement, SPBPlan((0, 0), 4))
    replay.poll(2.0)
    clock.advance_to(2.0)
    replay.stop("a", checkpoint=True)
    kept = dict(replay.checkpoints)
    assert kept["a"] > 0
    with pytest.raises(ReplanRefused, match="job a has no gang to re-plan"):
        replay.replan("a", placement, NEW_PLAN)
    assert replay.checkpoints == kept and replay.running_jobs() == set()


class ResizeEveryRunningJobToOne(PolicyBase):
    """Test policy: shrink every running job to one worker on its first GPU."""

    name = "test-resize"

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        return [
            Resize(job.id, job.placement[:1], full_backprop(1, 4), 64, "test: shrink")
            for job in snapshot.running
        ]


class RefusingResizes(RateDrivenExecutor):
    def resize(self, job_id: str, placement: object, plan: object, worker_batch: int) -> None:
        raise ReplanRefused(f"job {job_id}: this executor cannot resize")


def test_a_resize_the_executor_refuses_is_not_recorded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, clock, executor, cycle, decided = _running_job()
    before = store.get("a")
    executor.__class__ = RefusingResizes  # the same gangs, an executor that refuses resizes
    cycle.policy = ResizeEveryRunningJobToOne()
    clock.advance_to(5.0)
    with caplog.at_level(logging.WARNING, logger="jigsaw.scheduling.cycle"):
        report = cycle.run_once()
    assert (report.applied, report.skipped) == (0, 1)
    assert decided == []
    assert store.get("a") == before  # same size, same batch, same version, no event
    assert "resize of a refused, nothing recorded" in caplog.text
    assert executor.running_jobs() == {"a"}
