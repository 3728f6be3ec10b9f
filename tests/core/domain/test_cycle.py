"""The scheduling cycle end to end on the in-memory store, simulated executor, virtual clock."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.domain import transition
from jigsaw.model.executor_events import Failed
from jigsaw.model.lifecycle import JobState
from jigsaw.planning.planner import Planner
from jigsaw.policies import create_policy
from jigsaw.scheduling.cycle import SchedulingCycle
from jigsaw.scheduling.memstore import InMemoryStore
from jigsaw.simulator.rate_executor import ConstantRate, RateDrivenExecutor
from tests.core.support import run_until_idle, setup, submit


def test_fifo_runs_jobs_to_success_and_records_every_transition() -> None:
    store, clock, executor, cycle = setup()
    submit(store, "a", workers=2, iterations=100, at=0.0)
    submit(store, "b", workers=4, iterations=50, at=1.0)
    run_until_idle(clock, executor, cycle)
    a, b = store.get("a"), store.get("b")
    assert a.state == b.state == JobState.SUCCEEDED
    assert a.finished_at == pytest.approx(10.0)  # 100 iterations at 10 it/s
    assert b.started_at == pytest.approx(10.0)  # head-of-line: b needs all 4 GPUs
    assert b.finished_at == pytest.approx(15.0)
    assert [e.to_state for e in store.events("a")] == [
        JobState.PENDING,
        JobState.ADMITTED,
        JobState.RUNNING,
        JobState.SUCCEEDED,
    ]
    assert all(e.reason for e in store.events("a"))


def test_fifo_never_overallocates_and_keeps_gangs_whole() -> None:
    store, clock, executor, cycle = setup(num_gpus=4, per_node=2)
    for i in range(6):
        submit(store, f"j{i}", workers=1 + i % 3, iterations=30, at=float(i))
    for _ in range(50):
        cycle.run_once()
        used = [
            gpu for job in store.active_jobs() if job.state.holds_resources for gpu in job.placement
        ]
        assert len(used) == len(set(used)) <= 4
        for job in store.active_jobs():
            if job.state.holds_resources:
                assert len(job.placement) == job.spec.workers
        upcoming = executor.next_event_time()
        if upcoming is None:
            break
        clock.advance_to(upcoming)
    assert all(j.state == JobState.SUCCEEDED for j in store.all_jobs())


def test_gang_prefers_one_node() -> None:
    store, _clock, _executor, cycle = setup(num_gpus=4, per_node=2)
    submit(store, "one", workers=1, iterations=10, at=0.0)
    submit(store, "two", workers=2, iterations=10, at=1.0)
    cycle.run_once()
    assert {gpu[0] for gpu in store.get("two").placement} == {1}


def test_cancel_while_running_stops_the_gang() -> None:
    store, _clock, executor, cycle = setup()
    submit(store, "a", workers=2, iterations=1000, at=0.0)
    cycle.run_once()
    cycle.run_once()
    job = store.get("a")
    assert job.state == JobState.RUNNING
    cancelled, event = transition(job, JobState.CANCELLED, reason="user", at=1.0, actor="alice")
    store.save(cancelled, expected_version=job.version, event=event)
    cycle.run_once()
    assert executor.running_jobs() == set()


def test_retryable_failure_backs_off_then_resumes_from_progress() -> None:
    store, clock, executor, cycle = setup()
    submit(store, "a", workers=2, iterations=100, at=0.0)
    cycle.run_once()
    cycle.run_once()
    clock.advance_to(4.0)
    progress = executor.progress("a", clock.now())
    job = store.get("a")
    store.save(replace(job, iterations_done=progress), expected_version=job.version)
    executor.stop("a", checkpoint=True)
    cycle.observe([Failed("a", 4.0, "worker 1 died", retryable=True)])
    retrying = store.get("a")
    assert retrying.state == JobState.RETRYING and retrying.failures == 1
    assert retrying.retry_after == pytest.approx(9.0)
    clock.advance_to(6.0)
    cycle.run_once()
    assert store.get("a").state == JobState.RETRYING  # still backing off
    clock.advance_to(9.0)
    run_until_idle(clock, executor, cycle)
    done = store.get("a")
    assert done.state == JobState.SUCCEEDED
    assert done.finished_at == pytest.approx(9.0 + (100 - 40) / 10.0)


def test_crash_loop_marks_failed_with_reason() -> None:
    store, clock, executor, cycle = setup()
    submit(store, "a", workers=1, iterations=100, at=0.0)
    for attempt in range(3):
        run_for = clock.now()
        cycle.run_once()
        cycle.run_once()
        assert store.get("a").state == JobState.RUNNING, attempt
        executor.stop("a", checkpoint=False)
        cycle.observe([Failed("a", run_for, "OOM-killed", retryable=True)])
        clock.advance_to(clock.now() + 400.0)
    failed = store.get("a")
    assert failed.state == JobState.FAILED
    assert "gave up after 3 failures" in failed.reason


def test_control_plane_restart_requeues_without_charging_retries() -> None:
    store, clock, _executor, cycle = setup()
    submit(store, "a", workers=2, iterations=100, at=0.0)
    cycle.run_once()
    cycle.run_once()
    fresh = RateDrivenExecutor(ConstantRate(10.0))
    restarted = SchedulingCycle(
        store, fresh, create_policy("fifo", planner=Planner()), clock, cycle.cluster
    )
    restarted.run_once()
    job = store.get("a")
    assert job.failures == 0
    assert "control-plane restart" in store.events("a")[-1].reason


def test_node_loss_requeues_the_jobs_on_it() -> None:
    store, _clock, _executor, cycle = setup(num_gpus=4, per_node=2)
    submit(store, "a", workers=2, iterations=1000, at=0.0)
    cycle.run_once()
    cycle.run_once()
    lost_node = store.get("a").placement[0][0]
    cluster = Cluster.uniform(4, 2).without_node(lost_node)
    cycle.cluster = lambda: cluster
    cycle.run_once()
    job = store.get("a")
    assert job.state == JobState.RETRYING and "node" in job.reason


def test_zombie_report_from_an_old_attempt_is_ignored() -> None:
    store, _clock, _executor, cycle = setup()
    submit(store, "a", workers=1, iterations=100, at=0.0)
    cycle.run_once()
    cycle.run_once()
    job = store.get("a")
    assert job.attempt == 1
    cycle.observe([Failed("a", 1.0, "late crash report", retryable=False, attempt=0)])
    assert store.get("a").state == JobState.RUNNING
    cycle.observe([Failed("a", 1.0, "segfault", retryable=False, attempt=1)])
    assert store.get("a").state == JobState.FAILED


def test_cancel_racing_with_reconcile_does_not_abort_the_round() -> None:
    store, _clock, executor, cycle = setup()
    submit(store, "a", workers=1, iterations=1000, at=0.0)
    submit(store, "b", workers=1, iterations=10, at=0.0)
    cycle.run_once()
    executor.stop("a", checkpoint=False)  # the gang vanished (e.g. restart) ...

    class RacingStore(InMemoryStore):
        def save(self, job, *, expected_version, event=None):  # type: ignore[no-untyped-def]
            if job.id == "a" and event is not None and event.to_state != JobState.CANCELLED:
                current = self.get("a")
                cancelled, ev = transition(
                    current, JobState.CANCELLED, reason="user", at=0.5, actor="alice"
                )
                super().save(cancelled, expected_version=current.version, event=ev)
            return super().save(job, expected_version=expected_version, event=event)

    racing = RacingStore()
    for job in store.all_jobs():
        racing._jobs[job.id] = job  # same state, new store that races a cancel into reconcile
        racing._enter(job)
    cycle.store = racing
    report = cycle.run_once()  # must not raise
    assert report is not None
    assert racing.get("a").state == JobState.CANCELLED
