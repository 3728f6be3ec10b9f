"""Helpers shared by the core tests: a small fifo cycle on the in-memory store, simulated
executor and virtual clock."""

from __future__ import annotations

from jigsaw.goodput.source import JobGoodput
from jigsaw.model.cluster import Cluster, Placement
from jigsaw.model.domain import Job, JobSpec, submitted_event, transition
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import Plan
from jigsaw.oracle import Oracle
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies import create_policy
from jigsaw.scheduling.clock import VirtualClock
from jigsaw.scheduling.cycle import RetryPolicy, SchedulingCycle
from jigsaw.scheduling.memstore import InMemoryStore
from jigsaw.simulator.rate_executor import ConstantRate, RateDrivenExecutor


def setup(num_gpus: int = 4, per_node: int = 2, rate: float = 10.0, startup: float = 0.0):
    store = InMemoryStore()
    clock = VirtualClock()
    executor = RateDrivenExecutor(ConstantRate(rate, startup))
    cluster = Cluster.uniform(num_gpus, per_node)
    cycle = SchedulingCycle(
        store,
        executor,
        create_policy("fifo", planner=Planner()),
        clock,
        lambda: cluster,
        retry=RetryPolicy(max_failures=2, base_backoff_s=5.0),
    )
    return store, clock, executor, cycle


def submit(store: InMemoryStore, job_id: str, workers: int, iterations: int, at: float) -> Job:
    spec = JobSpec(name=job_id, model="mlp", workers=workers, iterations=iterations)
    job = Job(id=job_id, spec=spec, submitted_at=at)
    return store.add(job, submitted_event(job, "test"))


def run_until_idle(
    clock: VirtualClock, executor: RateDrivenExecutor, cycle: SchedulingCycle, limit: int = 1000
) -> None:
    for _ in range(limit):
        cycle.run_once()
        upcoming = executor.next_event_time()
        if upcoming is None:
            return
        clock.advance_to(max(upcoming, clock.now()))
    raise AssertionError("simulation did not go idle")


def running_job(spec: JobSpec, placement: Placement, plan: Plan, started_at: float) -> Job:
    """A job of ``spec`` submitted at 0, admitted at 0 onto ``placement`` with ``plan`` and
    RUNNING since ``started_at``, moved by ``transition`` as the cycle moves jobs."""
    job, _ = transition(
        Job(spec.name, spec, submitted_at=0.0),
        JobState.ADMITTED,
        reason="t",
        at=0.0,
        actor="t",
        placement=placement,
        plan=plan,
    )
    running, _ = transition(job, JobState.RUNNING, reason="t", at=started_at, actor="t")
    return running


def planner_for(oracle: Oracle) -> Planner:
    """The planner :func:`jigsaw.policies.builder.build_policy` gives a policy of ``oracle``."""
    return Planner(oracle.hardware, catalog=ModelCatalog(oracle.profiles))


class FixedSource:
    """A goodput source that knows what it was given (None: the job is not elastic)."""

    def __init__(self, known: dict[str, JobGoodput]) -> None:
        self.known = known

    def job_goodput(self, job: Job, now: float) -> JobGoodput | None:
        del now
        return self.known.get(job.id)
