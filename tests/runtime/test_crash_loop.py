"""The cycle's retry rules the runtime relies on (jigsaw/scheduling/cycle.py RetryPolicy): a crash
loop is
N failures within a time window, and a gang that fails before it started backs off too."""

from __future__ import annotations

from jigsaw.model.cluster import Cluster
from jigsaw.model.domain import Job, JobSpec, submitted_event
from jigsaw.model.executor_events import Failed
from jigsaw.model.lifecycle import JobState
from jigsaw.planning.planner import Planner
from jigsaw.policies import create_policy
from jigsaw.scheduling.clock import VirtualClock
from jigsaw.scheduling.cycle import RetryPolicy, SchedulingCycle
from jigsaw.scheduling.memstore import InMemoryStore
from jigsaw.simulator.rate_executor import ConstantRate, RateDrivenExecutor


def make_cycle(retry: RetryPolicy) -> tuple[InMemoryStore, VirtualClock, SchedulingCycle]:
    store, clock = InMemoryStore(), VirtualClock()
    cluster = Cluster.uniform(2, 2)
    executor = RateDrivenExecutor(ConstantRate(1.0))
    cycle = SchedulingCycle(
        store,
        executor,
        create_policy("fifo", planner=Planner()),
        clock,
        lambda: cluster,
        retry=retry,
    )
    job = Job(
        id="a", spec=JobSpec(name="a", model="mlp", workers=2, iterations=10**6), submitted_at=0
    )
    store.add(job, submitted_event(job, "test"))
    return store, clock, cycle


def fail_running(
    store: InMemoryStore, clock: VirtualClock, cycle: SchedulingCycle, at: float
) -> None:
    clock.advance_to(at)
    cycle.run_once()  # (re)start after the back-off; the simulated gang reports Started
    cycle.run_once()
    assert store.get("a").state == JobState.RUNNING
    cycle.observe([Failed("a", at, "worker died", retryable=True, attempt=store.get("a").attempt)])


def test_failures_spread_out_in_time_never_end_the_job() -> None:
    store, clock, cycle = make_cycle(RetryPolicy(max_failures=2, base_backoff_s=1, window_s=60))
    for at in (0.0, 100.0, 200.0, 300.0, 400.0):
        fail_running(store, clock, cycle, at)
        assert store.get("a").state == JobState.RETRYING
    assert store.get("a").failures == 5


def test_too_many_failures_within_the_window_is_a_crash_loop() -> None:
    store, clock, cycle = make_cycle(RetryPolicy(max_failures=2, base_backoff_s=1, window_s=60))
    for at in (0.0, 10.0):
        fail_running(store, clock, cycle, at)
        assert store.get("a").state == JobState.RETRYING
    fail_running(store, clock, cycle, 20.0)
    failed = store.get("a")
    assert failed.state == JobState.FAILED
    assert "gave up after 3 failures in 60s" in failed.reason
    assert failed.failures == 3, "every failure is counted, the last one too"
    codes = [str(event.code) for event in store.events("a") if event.actor == "executor"]
    assert codes[-1] == "Failed/CrashLoop"
    assert codes.count("Retrying/WorkerFailed") == 2


def test_a_gang_that_fails_to_launch_counts_and_backs_off() -> None:
    store, clock, cycle = make_cycle(RetryPolicy(max_failures=1, base_backoff_s=30))
    cycle.run_once()
    admitted = store.get("a")
    assert admitted.state == JobState.ADMITTED
    cycle.observe([Failed("a", 0.0, "could not reserve", retryable=True, attempt=admitted.attempt)])
    waiting = store.get("a")
    assert waiting.state == JobState.PREEMPTED and waiting.failures == 1
    assert waiting.retry_after == 30.0
    clock.advance_to(10.0)
    cycle.run_once()
    assert store.get("a").state == JobState.PREEMPTED  # still backing off
    clock.advance_to(31.0)
    cycle.run_once()
    relaunched = store.get("a")
    assert relaunched.state in (JobState.ADMITTED, JobState.RUNNING)
    cycle.observe(
        [Failed("a", 31.0, "could not reserve", retryable=True, attempt=relaunched.attempt)]
    )
    failed = store.get("a")
    assert failed.state == JobState.FAILED
    assert "gave up after 2 failures" in failed.reason and failed.failures == 2
