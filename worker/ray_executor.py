"""The Ray executor: the scheduler's Executor seam over gangs of Ray actors.

``JIGSAW_EXECUTOR=ray`` makes the service import this module lazily and build
:meth:`RayExecutor.from_env`; the cycle's cluster callback is :meth:`RayExecutor.cluster`.

- ``start``   launches a :class:`~worker.runtime.gang.Gang` (placement group + actors + leases)
              on its own thread; a job's previous gang, if still checkpointing, finishes first.
- ``stop``    with ``checkpoint=True`` asks the ranks to agree on a stop, checkpoint there and
              release the GPUs; without, kills the gang at once.
- ``replan``  (SPB plans) on the same GPUs offers a new plan version the ranks install
              together at their next control point; on other GPUs (or another world size)
              migrates: checkpoint, then a new gang of the same attempt restores on the new
              placement. A pipeline or hybrid gang may migrate under the same plan, but a new
              plan in place raises ``ReplanRefused`` (so does a job without a gang): the
              scheduler records nothing, and must stop it (checkpoint) and start it again.
- ``resize``  checkpoint, then a gang of the new size and per-worker batch restores it (the
              same attempt); one that cannot be placed in time goes back to the last size.
              A job without a gang raises ``ReplanRefused``, as ``replan`` does.
- ``poll``    hands over what the gang threads reported since the last poll, de-duplicated by
              the (job, attempt, iteration) ledger.

See docs/RUNTIME.md.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

from jigsaw.model.cluster import Cluster, Placement
from jigsaw.model.domain import Job
from jigsaw.model.executor_events import ExecutorEvent, Failed, Finished, Progressed
from jigsaw.model.plan import Plan
from jigsaw.planning.catalog import default_catalog
from jigsaw.scheduling.seams import ReplanRefused
from worker.runtime.checkpoints import CheckpointStore, checkpointed_jobs
from worker.runtime.gang import Gang
from worker.runtime.gang_launcher import GangRequest
from worker.runtime.inventory import RayInventory, connect
from worker.runtime.ledger import ProgressLedger
from worker.runtime.settings import RuntimeSettings


@dataclass(slots=True)
class _Report:
    gang: Gang
    event: ExecutorEvent


class RayExecutor:
    def __init__(self, settings: RuntimeSettings | None = None) -> None:
        self.settings = settings or RuntimeSettings.from_env()
        connect(self.settings)
        self.settings.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        self.inventory = RayInventory(self.settings.gpu_type)
        self.inventory.refresh()
        self._lock = threading.Lock()
        self._gangs: dict[str, Gang] = {}
        """The gang each job should have now (started, starting, or finished but not polled)."""
        self._retiring: list[Gang] = []
        """Gangs told to stop; they may still be checkpointing. Their reports are dropped."""
        self._outbox: list[_Report] = []
        self._ledger = ProgressLedger()
        self.catalog = default_catalog()

    @classmethod
    def from_env(cls) -> RayExecutor:
        return cls(RuntimeSettings.from_env())

    # -- cluster inventory --------------------------------------------------------------
    def cluster(self) -> Cluster:
        """The live Ray cluster (nodes with GPUs; dead nodes kept with ``alive=False``)."""
        return self.inventory.cluster()

    # -- Executor seam ------------------------------------------------------------------
    def start(self, job: Job, placement: Placement, plan: Plan) -> None:
        model = job.spec.model
        blocks_unknown = job.model_blocks is None and self.catalog.num_blocks(model) is None
        request = GangRequest(
            job_id=job.id,
            attempt=job.attempt,
            model=job.spec.model,
            placement=tuple(placement),
            plan=plan,
            plan_request=job.spec.plan_request if blocks_unknown else None,
            batch_size=job.current_worker_batch,
            learning_rate=job.spec.learning_rate,
            seed=job.spec.seed,
            iterations=job.spec.iterations,
            base_global_batch=(
                job.spec.global_batch if job.spec.batch_policy == "adaptive" else None
            ),
            optimizer=job.spec.optimizer,
        )
        with self._lock:
            previous = self._gangs.pop(job.id, None)
            if previous is not None:
                # The core never starts a job it still holds; if it does, the old gang is stale.
                previous.kill()
            predecessor = self._latest_retiring(job.id) or previous
            gang = Gang(request, self.settings, self.inventory, self._emit, predecessor=predecessor)
            self._gangs[job.id] = gang
        self.inventory.refresh()
        gang.launch()

    def stop(self, job_id: str, *, checkpoint: bool) -> None:
        with self._lock:
            gang = self._gangs.pop(job_id, None)
            if gang is None:
                return
            self._retiring.append(gang)
        if checkpoint:
            gang.stop_after_checkpoint()
        else:
            gang.kill()

    def _reap_retired(self) -> None:
        """Forget retiring gangs whose thread has ended (call with ``_lock`` held)."""
        self._retiring = [g for g in self._retiring if not g.join(0)]

    def checkpointed_jobs(self) -> set[str]:
        return checkpointed_jobs(self.settings.checkpoint_dir)

    def discard_checkpoints(self, job_id: str) -> bool:
        with self._lock:
            self._reap_retired()
            if job_id in self._gangs or any(g.job_id == job_id for g in self._retiring):
                return False
        # Outside the lock (a large checkpoint takes a while to delete): the sweep only asks
        # for terminal jobs, which are never started again.
        CheckpointStore(self.settings.checkpoint_dir, job_id).remove_all()
        return True

    def replan(self, job_id: str, placement: Placement, plan: Plan) -> None:
        with self._lock:
            gang = self._gangs.get(job_id)
        if gang is None:
            raise ReplanRefused(f"job {job_id} has no gang to re-plan (it ended or was stopped)")
        if plan != gang.plan and not both_spb(gang.plan, plan):
            # Pipeline and hybrid workers hold different parts of the model: a new plan needs
            # a checkpoint in the old layout and a restart in the new one (stop, then start).
            raise ReplanRefused(
                f"job {job_id} runs {gang.plan.describe()}, which cannot change to "
                f"{plan.describe()} in place: stop it with a checkpoint and start it again"
            )
        if tuple(placement) == gang.placement:
            gang.offer_plan(plan)
            return
        # Another placement: checkpoint where it is, restore where it should be.
        with self._lock:
            self._gangs.pop(job_id, None)
            self._retiring.append(gang)
            request = replace(
                gang.request, placement=tuple(placement), plan=plan, plan_request=None
            )
            successor = Gang(request, self.settings, self.inventory, self._emit, predecessor=gang)
            self._gangs[job_id] = successor
        gang.stop_after_checkpoint()
        successor.launch()

    def resize(self, job_id: str, placement: Placement, plan: Plan, worker_batch: int) -> None:
        """At the next control point the gang agrees to stop and checkpoints; a gang of the
        new size (its own placement group) restores that checkpoint, each worker taking
        ``worker_batch`` samples. The sampler's position counts global samples, so the new
        ranks take the rest of the epoch between them (nothing skipped or seen twice), and
        the optimizer state is restored whole. If the new gang cannot be placed within
        ``resize_placement_timeout_s``, it restarts at the last size from the same checkpoint
        and reports :class:`~jigsaw.model.executor_events.ResizeReverted`. Raises
        :class:`ReplanRefused`, having changed nothing, when the job has no gang."""
        with self._lock:
            gang = self._gangs.pop(job_id, None)
            if gang is None:
                # The gang ended meanwhile: refused, so the cycle records no resize, and
                # reconcile sees the lost gang and restarts the job from its checkpoint.
                raise ReplanRefused(f"job {job_id} has no gang to resize (it ended or was stopped)")
            self._retiring.append(gang)
            fallback = replace(gang.request, plan=gang.plan, plan_request=None)
            request = replace(
                gang.request,
                placement=tuple(placement),
                plan=plan,
                plan_request=None,
                batch_size=worker_batch,
            )
            successor = Gang(
                request,
                self.settings,
                self.inventory,
                self._emit,
                predecessor=gang,
                fallback=fallback,
            )
            self._gangs[job_id] = successor
        gang.stop_after_checkpoint()
        self.inventory.refresh()
        successor.launch()

    def poll(self, now: float) -> Sequence[ExecutorEvent]:
        del now  # events carry the wall time at which the gang saw them
        with self._lock:
            outbox, self._outbox = self._outbox, []
            self._reap_retired()
            events: list[ExecutorEvent] = []
            for report in outbox:
                gang, event = report.gang, report.event
                if self._gangs.get(gang.job_id) is not gang:
                    continue  # a retired or replaced gang: the scheduler moved on
                if isinstance(event, Progressed) and not self._ledger.accept(
                    gang.job_id, gang.attempt, event.iterations_done
                ):
                    continue
                events.append(event)
                if isinstance(event, Finished | Failed):
                    # Reaped only now, so the cycle never sees a RUNNING job without a gang
                    # before it has seen why the gang ended.
                    del self._gangs[gang.job_id]
                if isinstance(event, Finished):
                    self._ledger.forget(gang.job_id)
            return events

    def running_jobs(self) -> set[str]:
        with self._lock:
            return set(self._gangs)

    def next_event_time(self) -> float | None:
        return None

    # -- introspection (tests, benchmarks) and shutdown --------------------------------
    def gang(self, job_id: str) -> Gang | None:
        with self._lock:
            return self._gangs.get(job_id)

    def shutdown(self) -> None:
        with self._lock:
            gangs = list(self._gangs.values()) + self._retiring
            self._gangs, self._retiring = {}, []
        for gang in gangs:
            gang.kill()
        for gang in gangs:
            gang.join(10)

    # -- internals ----------------------------------------------------------------------
    def _emit(self, gang: Gang, event: ExecutorEvent) -> None:
        with self._lock:
            self._outbox.append(_Report(gang, event))

    def _latest_retiring(self, job_id: str) -> Gang | None:
        for gang in reversed(self._retiring):
            if gang.job_id == job_id:
                return gang
        return None


def both_spb(current: Plan, new: Plan) -> bool:
    return current.kind == new.kind == "spb"


def create_executor() -> RayExecutor:
    """What ``JIGSAW_EXECUTOR=ray`` builds: settings from the environment."""
    return RayExecutor.from_env()
