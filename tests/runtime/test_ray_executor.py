"""The Ray executor on a real local Ray: SPB gangs of actors trained through the real cycle.

Default suite: one job trained to SUCCEEDED with a mid-run plan switch; an entrypoint model
that reports its K; entrypoints the workers cannot use (no such module, a plan deeper than
the model) failing once, without retry. Slow (three gang starts or more each, 25-50 s on two
shared cores): a preemption with resume from checkpoint, a worker killed mid-iteration, a hung
worker, the checkpoint sweep after a cancellation.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from jigsaw.model.domain import transition
from jigsaw.model.executor_events import Finished, Progressed
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import SPBPlan
from jigsaw.scheduling.retention import sweep_checkpoints
from tests.runtime.support import PriorityPreemptingPolicy, make_harness
from worker.runtime.checkpoints import CheckpointStore

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("local_ray")]


def test_an_entrypoint_model_reports_its_block_count_and_runs_its_requested_plan(
    tmp_path: Path,
) -> None:
    """The catalog cannot know a user's model: the job starts with full backprop, the workers
    resolve `staircase` against the 3 blocks they built, and the first lease teaches the
    control plane K and the plan they run."""
    h = make_harness(tmp_path)
    try:
        h.submit(
            "mine", model="worker.zoo.examples.tiny_regression:build", workers=2, iterations=40
        )
        h.run_until(lambda: bool(h.progress_of("mine")), timeout_s=120)
        learned = h.store.get("mine")
        assert learned.model_blocks == 3
        assert learned.plan == SPBPlan((0, 1), 3)
        h.run_until(h.all_terminal, timeout_s=120)
        assert h.store.get("mine").state == JobState.SUCCEEDED, h.store.get("mine").reason
        first = next(e for e in h.events if isinstance(e, Progressed))
        assert first.outcome is not None and first.outcome.plan == SPBPlan((0, 1), 3)
        assert first.metrics["plan"] == [0, 1] and first.metrics["num_blocks"] == 3
    finally:
        h.executor.shutdown()


def test_an_entrypoint_the_workers_cannot_use_fails_once_with_the_reason(tmp_path: Path) -> None:
    """The API accepts any well-formed ``package.module:function`` and any plan for it; only
    the workers can import it and learn its K. A module that is not there, or a plan deeper
    than the model they built (tiny_regression has 3 blocks), fails the job for good with
    that reason: no retry, no back-off loop."""
    h = make_harness(tmp_path)
    try:
        h.submit("typo", model="no_such_package_xyz.models:build", workers=2, iterations=20)
        h.submit(
            "deep",
            model="worker.zoo.examples.tiny_regression:build",
            spb="0,5",
            workers=2,
            iterations=20,
        )
        h.run_until(h.all_terminal, timeout_s=120)
        typo, deep = h.store.get("typo"), h.store.get("deep")
        assert "cannot import module 'no_such_package_xyz.models'" in typo.reason, typo.reason
        assert "No module named 'no_such_package_xyz'" in typo.reason, typo.reason
        assert "depth 5 of worker 1 is outside the model" in deep.reason, deep.reason
        for job in (typo, deep):
            assert job.state == JobState.FAILED and job.attempt == 1
            states = [event.to_state for event in h.store.events(job.id)]
            assert JobState.RETRYING not in states, states
    finally:
        h.executor.shutdown()


def test_digits_cnn_trains_to_success_and_switches_plan_on_every_rank_at_once(
    tmp_path: Path,
) -> None:
    h = make_harness(tmp_path)
    try:
        h.submit("demo", workers=2, iterations=100, batch_size=32)
        h.run_until(lambda: bool(h.progress_of("demo")), timeout_s=120)
        running = h.store.get("demo")
        assert running.state == JobState.RUNNING and isinstance(running.plan, SPBPlan)
        assert running.plan.depths == (0, 2)
        h.executor.replan("demo", running.placement, SPBPlan((0, 1), running.plan.num_blocks))
        h.run_until(h.all_terminal, timeout_s=120)

        job = h.store.get("demo")
        assert job.state == JobState.SUCCEEDED, job.reason
        assert job.iterations_done == 100
        finished = [e for e in h.events if isinstance(e, Finished)]
        assert len(finished) == 1 and finished[0].metrics["accuracy"] > 0.8
        leases = [e for e in h.events if isinstance(e, Progressed)]
        assert [e.iterations_done for e in leases] == [20, 40, 60, 80, 100]
        assert leases[-1].metrics["accuracy"] == finished[0].metrics["accuracy"]
        assert {e.attempt for e in h.events} == {job.attempt}
        assert leases[-1].metrics["loss"] < leases[0].metrics["loss"] / 2
        # Every rank ran the new plan from the same iteration (summaries refuse disagreement).
        switched = [e.metrics for e in leases if "plan_switched_at" in e.metrics]
        assert len(switched) == 1 and switched[0]["plan"] == [0, 1]
        assert leases[-1].metrics["plan"] == [0, 1] and leases[-1].metrics["plan_version"] == 1
        first = leases[0].metrics
        assert first["saved_activation_bytes"][0] > first["saved_activation_bytes"][1] > 0
        assert all(sent > 0 for sent in first["bytes_sent"])
        assert not (tmp_path / "ckpt" / "demo").exists()  # checkpoints go with success
    finally:
        h.executor.shutdown()


@pytest.mark.slow
def test_preempted_job_checkpoints_and_resumes_where_it_stopped(tmp_path: Path) -> None:
    h = make_harness(tmp_path, gpus=2, policy=PriorityPreemptingPolicy())
    try:
        h.submit("low", workers=2, iterations=100, priority=0)
        h.run_until(lambda: len(h.progress_of("low")) >= 2, timeout_s=120)
        h.submit("high", workers=2, iterations=20, priority=10)
        h.run_until(lambda: h.store.get("low").state == JobState.PREEMPTED, timeout_s=60)
        h.run_until(h.all_terminal, timeout_s=240)

        low, high = h.store.get("low"), h.store.get("high")
        assert high.state == low.state == JobState.SUCCEEDED
        assert low.preemptions == 1 and low.attempt == 2
        preempted = [e for e in h.store.events("low") if e.to_state == JobState.PREEMPTED]
        assert "preempted by high" in preempted[0].reason
        progress = h.progress_of("low")
        before = [it for attempt, it in progress if attempt == 1]
        after = [it for attempt, it in progress if attempt == 2]
        # Resumed from the preemption checkpoint: no restart from 0, at most one lease lost.
        assert after and min(after) > max(before)
        assert min(after) <= max(before) + 20 + 10 + 20
        assert low.iterations_done == 100
    finally:
        h.executor.shutdown()


@pytest.mark.slow
def test_killed_worker_restarts_the_gang_from_its_last_checkpoint(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    try:
        h.submit("victim", workers=2, iterations=100)
        h.run_until(lambda: len(h.progress_of("victim")) >= 2, timeout_s=120)
        gang = h.executor.gang("victim")
        assert gang is not None
        beats = gang.pids()
        os.kill(beats[1].pid, signal.SIGKILL)  # mid-lease: leases never pause
        h.run_until(lambda: h.store.get("victim").state == JobState.RETRYING, timeout_s=60)
        assert "died" in h.store.get("victim").reason
        h.run_until(h.all_terminal, timeout_s=240)

        job = h.store.get("victim")
        assert job.state == JobState.SUCCEEDED and job.failures == 1 and job.attempt == 2
        progress = h.progress_of("victim")
        before = [it for attempt, it in progress if attempt == 1]
        after = [it for attempt, it in progress if attempt == 2]
        # Checkpoints follow every lease: the restart resumes at the last reported lease.
        assert min(after) == max(before) + 20
    finally:
        h.executor.shutdown()


@pytest.mark.slow
def test_hung_worker_is_detected_by_heartbeats_and_the_gang_retried(tmp_path: Path) -> None:
    from tests.runtime.faulty import arm_hang

    arm_hang()
    h = make_harness(tmp_path, hang_timeout_s=6.0, heartbeat_interval_s=1.0)
    try:
        h.submit("stuck", workers=2, iterations=60, model="tests.runtime.faulty:hang_once_mlp")
        started = time.monotonic()
        h.run_until(lambda: h.store.get("stuck").state == JobState.RETRYING, timeout_s=120)
        assert "hung" in h.store.get("stuck").reason
        assert time.monotonic() - started < 90
        h.run_until(h.all_terminal, timeout_s=180)
        assert h.store.get("stuck").state == JobState.SUCCEEDED
    finally:
        h.executor.shutdown()


@pytest.mark.slow
def test_checkpoints_of_a_cancelled_job_are_swept_once_its_gang_is_gone(tmp_path: Path) -> None:
    h = make_harness(tmp_path)
    checkpoints = CheckpointStore(tmp_path / "ckpt", "doomed")
    stranger = tmp_path / "ckpt" / "not-ours"
    stranger.mkdir(parents=True)
    try:
        h.submit("doomed", workers=2, iterations=2000, batch_size=32)
        h.run_until(lambda: bool(h.progress_of("doomed")), timeout_s=120)
        h.executor.stop("doomed", checkpoint=True)  # as a preemption does
        deadline = time.monotonic() + 60
        while checkpoints.latest() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert checkpoints.latest() is not None

        # Not terminal yet: a preempted job restores from these, so the sweep keeps them.
        kept = sweep_checkpoints(h.executor, h.store)
        assert kept.discarded == [] and kept.unknown == ["not-ours"]
        assert checkpoints.latest() is not None

        job = h.store.get("doomed")
        cancelled, event = transition(
            job, JobState.CANCELLED, reason="cancelled by test", at=time.time(), actor="test"
        )
        h.store.save(cancelled, expected_version=job.version, event=event)
        outcomes: list[list[str]] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            report = sweep_checkpoints(h.executor, h.store)
            outcomes.append(report.discarded)
            if report.discarded:
                break
            assert report.busy == ["doomed"]  # the stopping gang may still write
            time.sleep(0.2)
        assert outcomes[-1] == ["doomed"]
        assert not checkpoints.directory.exists()
        assert stranger.is_dir()  # unknown directories are never touched
    finally:
        h.executor.shutdown()
