"""Helpers for driving the real scheduling cycle against the Ray executor in tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from jigsaw.model.cluster import Cluster, Node
from jigsaw.model.decisions import Decision, Preempt, Resize, Start
from jigsaw.model.domain import Job, JobSpec, submitted_event
from jigsaw.model.executor_events import ExecutorEvent
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import full_backprop, resolve_plan
from jigsaw.model.snapshot import Snapshot
from jigsaw.planning.planner import Planner
from jigsaw.policies import create_policy
from jigsaw.policies.base import Policy, PolicyBase
from jigsaw.policies.shared.placement import compact_placement, group_by_node, take
from jigsaw.scheduling.clock import WallClock
from jigsaw.scheduling.cycle import RetryPolicy, SchedulingCycle
from jigsaw.scheduling.memstore import InMemoryStore
from worker.ray_executor import RayExecutor
from worker.runtime.settings import RuntimeSettings


class PriorityPreemptingPolicy(PolicyBase):
    """Test policy: start by priority; evict the lowest-priority running job for a waiting one
    of higher priority that does not fit (naming it as the preemptor)."""

    name = "test-priority"

    def _script_done(self, job: Job) -> bool:
        """Every step asked, and the gang of the last resize has reported a lease: rounds
        are seconds apart and an mlp lease takes milliseconds, so a look may come several
        leases late, past ``stop_at`` before the script has run."""
        asked = sum(1 for job_id, _ in self.asked if job_id == job.id)
        return asked == len(self.script) and job.iterations_done > self.resized_at.get(job.id, -1)

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        free = group_by_node(snapshot.free_gpus())
        decisions: list[Decision] = []
        waiting = sorted(snapshot.waiting, key=lambda j: (-j.spec.priority, j.submitted_at))
        for job in waiting:
            placement = compact_placement(free, job.spec.workers)
            if placement is not None:
                take(free, placement)
                plan = job.plan or resolve_plan(job.spec.spb, job.spec.workers, 4)
                decisions.append(Start(job.id, placement, plan, "priority: fits"))
                continue
            victims = [r for r in snapshot.running if r.spec.priority < job.spec.priority]
            if victims:
                victim = min(victims, key=lambda r: r.spec.priority)
                decisions.append(Preempt(victim.id, "priority: makes room", by=job.id))
            break
        return decisions


class ScriptedResizePolicy(PolicyBase):
    """Test policy: start a waiting job (never one preempted before) at its size; then resize
    it to ``size`` once it has done ``at`` iterations, for each ``(at, size)`` of ``script``,
    keeping the global batch (``batch_policy: fixed``) or taking the step's third entry as the
    new global batch (``adaptive``); stop it with a checkpoint once it has done ``stop_at``
    iterations and every step, so a test can read its weights. Steps go in order, whatever
    iteration the policy first sees."""

    name = "test-resize"

    def __init__(self, script: list[tuple[int, ...]], stop_at: int | None = None) -> None:
        self.script = script
        self.stop_at = stop_at
        self.asked: set[tuple[str, int]] = set()
        """(job, script step) already asked for: a reverted resize is not asked again."""
        self.resized_at: dict[str, float] = {}
        """Iterations a job had done when its last resize was asked."""

    def _script_done(self, job: Job) -> bool:
        """Every step asked, and the gang of the last resize has reported a lease: rounds
        are seconds apart and an mlp lease takes milliseconds, so a look may come several
        leases late, past ``stop_at`` before the script has run."""
        asked = sum(1 for job_id, _ in self.asked if job_id == job.id)
        return asked == len(self.script) and job.iterations_done > self.resized_at.get(job.id, -1)

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        free = group_by_node(snapshot.free_gpus())
        decisions: list[Decision] = []
        for job in snapshot.waiting:
            placement = compact_placement(free, job.spec.workers)
            if job.preemptions == 0 and placement is not None:
                take(free, placement)
                plan = resolve_plan(job.spec.spb, job.spec.workers, 4)
                decisions.append(Start(job.id, placement, plan, "test: fits"))
        for job in snapshot.running:
            if job.state != JobState.RUNNING or job.plan is None:
                continue
            if self.stop_at is not None and job.iterations_done >= self.stop_at:
                if self._script_done(job):
                    decisions.append(Preempt(job.id, "test: stop to read the weights"))
                    continue
            # In order, one step per reported lease: a late look (a loaded box reports late)
            # must not skip a step, nor ask the next before the resized gang has trained.
            if job.iterations_done <= self.resized_at.get(job.id, -1):
                continue
            steps = [
                i
                for i, step in enumerate(self.script)
                if job.iterations_done >= step[0] and (job.id, i) not in self.asked
            ]
            if not steps:
                continue
            size = self.script[steps[0]][1]
            global_batch = (self.script[steps[0]] + (job.spec.global_batch,))[2]
            if size == len(job.placement):
                self.asked.add((job.id, steps[0]))
                continue
            placement = job.placement[:size]
            if size > len(job.placement):
                grown = compact_placement(free, size - len(job.placement))
                if grown is None:
                    continue
                take(free, grown)
                placement = (*job.placement, *grown)
            self.asked.add((job.id, steps[0]))
            self.resized_at[job.id] = job.iterations_done
            decisions.append(
                Resize(
                    job.id,
                    placement,
                    full_backprop(size, job.plan.num_blocks),
                    global_batch // size,
                    f"test: {len(job.placement)} -> {size} workers at {job.iterations_done:g}",
                )
            )
        return decisions


@dataclass
class Harness:
    store: InMemoryStore
    executor: RayExecutor
    cycle: SchedulingCycle
    events: list[ExecutorEvent] = field(default_factory=list)

    def submit(self, name: str, **spec: object) -> Job:
        values: dict[str, object] = {"model": "digits_cnn", "spb": "staircase", **spec}
        job = Job(id=name, spec=JobSpec(name=name, **values), submitted_at=time.time())  # type: ignore[arg-type]
        return self.store.add(job, submitted_event(job, "test"))

    def run_until(self, done: Callable[[], bool], timeout_s: float, step_s: float = 0.3) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.cycle.run_once()
            if done():
                return
            time.sleep(step_s)
        states = {j.id: (j.state, j.reason) for j in self.store.all_jobs()}
        raise AssertionError(f"timed out after {timeout_s}s; jobs: {states}")

    def all_terminal(self) -> bool:
        return all(j.state.is_terminal for j in self.store.all_jobs())

    def progress_of(self, job_id: str) -> list[tuple[int | None, float]]:
        from jigsaw.model.executor_events import Progressed

        return [
            (e.attempt, e.iterations_done)
            for e in self.events
            if isinstance(e, Progressed) and e.job_id == job_id
        ]


def make_harness(
    tmp_path: Path,
    *,
    gpus: int = 4,
    policy: Policy | None = None,
    retry: RetryPolicy | None = None,
    **settings: object,
) -> Harness:
    values: dict[str, object] = {
        "checkpoint_dir": tmp_path / "ckpt",
        "lease_iterations": 20,
        "control_every": 10,
        "startup_timeout_s": 120.0,
        **settings,
    }
    executor = RayExecutor(RuntimeSettings(**values))  # type: ignore[arg-type]
    node = executor.cluster().nodes[0]
    # The scheduler sees only ``gpus`` of the local node's logical GPUs.
    cluster = Cluster((Node(0, node.name, gpus),))
    store = InMemoryStore()
    harness = Harness(store, executor, None)  # type: ignore[arg-type]
    harness.cycle = SchedulingCycle(
        store,
        executor,
        policy or create_policy("fifo", planner=Planner()),
        WallClock(),
        lambda: cluster,
        retry=retry or RetryPolicy(max_failures=3, base_backoff_s=1.0),
        on_event=harness.events.append,
    )
    return harness
