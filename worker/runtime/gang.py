"""The driver side of one gang: reserve, launch, rendezvous, then run leases until done.

Each gang runs on its own daemon thread in the service process, so the executor's seam calls
return at once. The thread:

1. waits for the job's previous gang (a preempted or migrating one) to finish checkpointing;
2. reserves a placement group: one bundle per worker with a GPU fraction, pinned to the Ray
   node the scheduler chose (``ray.io/node-id`` label selector) - all or nothing;
3. starts one :class:`~worker.runtime.gang_worker.GangWorker` per bundle, has rank 0 pick the
   rendezvous address, and sets every rank up (process group, trainer, restore);
   (steps 2 and 3 are :class:`~worker.runtime.gang_launcher.GangLauncher`'s);
4. runs leases, keeping two queued on every actor so no rank idles between leases, and
   reports each finished lease; watches heartbeats for hung ranks;
5. tears the gang down (kills the actors, removes the placement group) whatever happened.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup

from jigsaw.model.executor_events import (
    ExecutorEvent,
    Failed,
    Finished,
    Progressed,
    ResizeReverted,
    Started,
)
from jigsaw.model.lease_outcome import LeaseOutcome
from jigsaw.model.plan import Plan
from worker.runtime.checkpoints import CheckpointStore
from worker.runtime.failures import GangFailure, PlacementTimeout, diagnose
from worker.runtime.gang_launcher import GangLauncher, GangRequest, release
from worker.runtime.heartbeats import HeartbeatWatch
from worker.runtime.inventory import RayInventory
from worker.runtime.messages import (
    Heartbeat,
    LeaseOrder,
    LeaseReport,
    PlanOffer,
)
from worker.runtime.settings import RuntimeSettings
from worker.runtime.summary import summarize

log = logging.getLogger(__name__)

PIPELINE_DEPTH = 2
"""Leases queued per actor: the next lease starts the moment the previous one reports."""

REPORTS_KEPT = 2000
OUTPUT_TAIL_LINES = 20
"""Lines of each rank's stdout and of its stderr put in the job's log when its gang fails."""
OUTPUT_TAIL_WAIT_S = 5.0

Emit = Callable[["Gang", ExecutorEvent], None]


class _Halted(Exception):
    """The gang was told to stop (killed, or stopped after its checkpoint)."""


class Gang:
    def __init__(
        self,
        request: GangRequest,
        settings: RuntimeSettings,
        inventory: RayInventory,
        emit: Emit,
        *,
        predecessor: Gang | None = None,
        fallback: GangRequest | None = None,
    ) -> None:
        self.request = request
        self._fallback = fallback
        """A resize's gang: the job's last size, restarted from the resize's checkpoint when
        the new size cannot be placed in time (``PlacementTimeout``)."""
        self.settings = settings
        self.job_id = request.job_id
        self.attempt = request.attempt
        self.placement = request.placement
        self._inventory = inventory
        self._emit = emit
        self._predecessor = predecessor
        self._lock = threading.Lock()
        self._plan = PlanOffer(0, request.plan)
        self._actors: list[Any] = []
        self._pg: PlacementGroup | None = None
        self._killed = False
        self._stop_requested = False
        self._thread = threading.Thread(target=self._run, name=f"gang-{self.job_id}", daemon=True)
        self.started_at: float | None = None
        self._iteration = 0
        self._heartbeats = HeartbeatWatch(settings.hang_timeout_s)
        self.reports: deque[LeaseOutcome] = deque(maxlen=REPORTS_KEPT)
        """Summaries of the latest leases, newest last (benchmarks and tests read them)."""

    # -- called by the executor (any thread) --------------------------------------------
    def launch(self) -> None:
        self._thread.start()

    @property
    def plan(self) -> Plan:
        with self._lock:
            return self._plan.plan

    def offer_plan(self, plan: Plan) -> PlanOffer:
        """A new plan version; ranks install it together at their next control point."""
        with self._lock:
            self._plan = PlanOffer(self._plan.version + 1, plan)
            offer, actors = self._plan, list(self._actors)
        for actor in actors:
            actor.offer_plan.remote(offer)
        return offer

    def stop_after_checkpoint(self) -> None:
        with self._lock:
            self._stop_requested = True
            actors = list(self._actors)
        for actor in actors:
            actor.request_stop.remote()

    def kill(self) -> None:
        """Stop at once, no checkpoint. Safe to call more than once and from any thread."""
        with self._lock:
            self._killed = True
        self._teardown()

    def join(self, timeout: float | None = None) -> bool:
        if self._thread.ident is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def pids(self) -> list[Heartbeat]:
        """Heartbeats of every rank (tests use the pids to kill a worker process)."""
        with self._lock:
            actors = list(self._actors)
        return list(ray.get([a.heartbeat.remote() for a in actors], timeout=30))

    # -- the gang thread ----------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._await_predecessor()
            try:
                start_iteration = self._start_gang()
            except PlacementTimeout as timeout:
                if self._fallback is None or self._halted():
                    raise
                start_iteration = self._revert_resize(timeout)
            self._started(start_iteration)
            self._lease_loop()
        except _Halted:
            pass
        except GangFailure as failure:
            if not self._halted():
                self._emit(
                    self,
                    Failed(
                        self.job_id,
                        time.time(),
                        failure.reason,
                        retryable=failure.retryable,
                        attempt=self.attempt,
                        detail=(*failure.detail, *self._output_tails()),
                    ),
                )
        except Exception as exc:  # the thread must never die silently
            log.exception("gang %s crashed", self.job_id)
            if not self._halted():
                self._emit(
                    self,
                    Failed(
                        self.job_id,
                        time.time(),
                        f"runtime error: {exc}",
                        retryable=True,
                        attempt=self.attempt,
                    ),
                )
        finally:
            self._teardown()

    def _output_tails(self) -> list[str]:
        """What each rank still alive wrote last to stdout and stderr, for the job's log
        (before the teardown kills the actors; a dead rank has nothing to say)."""
        with self._lock:
            actors = list(self._actors)
        refs = [actor.output_tail.remote(OUTPUT_TAIL_LINES) for actor in actors]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=OUTPUT_TAIL_WAIT_S)
        lines: list[str] = []
        for rank, ref in enumerate(refs):
            if ref not in ready:
                continue
            try:
                tails: dict[str, list[str]] = ray.get(ref, timeout=0)
            except Exception as exc:  # that rank is gone: its output went with it
                log.debug("no output tail from rank %s of %s: %s", rank, self.job_id, exc)
                continue
            for stream, tail in tails.items():
                lines.append(f"rank {rank} {stream} (last {len(tail)} lines):")
                lines.extend(f"  {line}" for line in tail)
        return lines

    def _halted(self) -> bool:
        with self._lock:
            return self._killed

    def _check_killed(self) -> None:
        if self._halted():
            raise _Halted

    def _await_predecessor(self) -> None:
        previous = self._predecessor
        if previous is None:
            return
        if not previous.join(self.settings.checkpoint_timeout_s):
            log.warning("previous gang of %s did not stop in time; killing it", self.job_id)
            previous.kill()
            previous.join(30)
        self._predecessor = None

    def _start_gang(self, *, placement_timeout_s: float | None = None) -> int:
        # Each reservation is held here as soon as it exists, so a kill from another thread
        # (``_teardown``) releases it however far the launch got.
        if placement_timeout_s is None and self._fallback is not None:
            placement_timeout_s = self.settings.resize_placement_timeout_s
        launcher = GangLauncher(
            self.request,
            self.settings,
            self._inventory,
            self._check_killed,
            placement_timeout_s=placement_timeout_s,
        )
        with self._lock:
            if self._stop_requested:
                raise _Halted
        pg = launcher.reserve()
        with self._lock:
            self._pg = pg
        launcher.wait_ready(pg)
        actors = launcher.start_actors(pg)
        with self._lock:
            self._actors = actors
            stop = self._stop_requested
        self._check_killed()
        if stop:
            raise _Halted
        return launcher.set_up(actors, self.plan)

    def _revert_resize(self, timeout: PlacementTimeout) -> int:
        """Release what the resize reserved, report the revert, and start the job again at
        its last size from the same checkpoint (the resize's stop wrote it; nothing ran
        since)."""
        assert self._fallback is not None
        fallback, self._fallback = self._fallback, None
        self._teardown()
        resized = len(self.request.placement)
        with self._lock:
            self.request = fallback
            self.placement = fallback.placement
            self._plan = PlanOffer(self._plan.version + 1, fallback.plan)
        log.warning("gang %s: resize to %s workers reverted: %s", self.job_id, resized, timeout)
        self._emit(
            self,
            ResizeReverted(
                self.job_id,
                time.time(),
                fallback.placement,
                fallback.plan,
                fallback.batch_size,
                f"resize to {resized} workers could not start ({timeout.reason}); back to "
                f"{len(fallback.placement)} workers from the checkpoint",
                attempt=self.attempt,
            ),
        )
        return self._start_gang(placement_timeout_s=None)

    def _started(self, iteration: int) -> None:
        self._check_killed()
        self.started_at = time.time()
        log.info("gang %s attempt %s up at iteration %s", self.job_id, self.attempt, iteration)
        self._emit(self, Started(self.job_id, self.started_at, attempt=self.attempt))
        self._iteration = iteration

    def _order(self, index: int) -> LeaseOrder:
        with self._lock:
            plan = self._plan
        return LeaseOrder(
            index=index,
            iterations=self.settings.lease_iterations,
            plan=plan,
            checkpoint_after=(index + 1) % self.settings.checkpoint_every_leases == 0,
        )

    def _lease_loop(self) -> None:
        in_flight: deque[list[ray.ObjectRef[Any]]] = deque()
        next_index = 0
        while True:
            while len(in_flight) < PIPELINE_DEPTH:
                order = self._order(next_index)
                next_index += 1
                in_flight.append([a.run_lease.remote(order) for a in self._actors])
            reports = self._await_lease(in_flight[0])
            in_flight.popleft()
            outcome = summarize(reports)
            self.reports.append(outcome)
            head = reports[0]
            self._check_killed()
            if head.end_iteration > self._iteration or "accuracy" in outcome.evaluation:
                self._iteration = head.end_iteration
                self._emit(
                    self,
                    Progressed(
                        self.job_id,
                        time.time(),
                        float(head.end_iteration),
                        outcome,
                        attempt=self.attempt,
                    ),
                )
            if head.stopped:
                raise _Halted
            if head.end_iteration >= self.request.iterations:
                # Before the report, so whoever sees SUCCEEDED finds the checkpoints gone.
                # No rank writes one after its last lease (only a stop would, and a stopped
                # lease reports ``stopped`` instead of reaching here).
                CheckpointStore(self.settings.checkpoint_dir, self.job_id).remove_all()
                self._emit(
                    self,
                    Finished(
                        self.job_id,
                        time.time(),
                        float(head.end_iteration),
                        outcome,
                        attempt=self.attempt,
                    ),
                )
                return

    def _await_lease(self, refs: list[ray.ObjectRef[Any]]) -> list[LeaseReport]:
        """Wait for every rank's report, checking heartbeats while the lease runs."""
        pending = list(refs)
        while pending:
            self._check_killed()
            ready, pending = ray.wait(
                pending, num_returns=len(pending), timeout=self.settings.heartbeat_interval_s
            )
            for ref in ready:
                try:
                    ray.get(ref, timeout=0)
                except Exception as exc:
                    self._check_killed()
                    raise diagnose(exc, refs) from exc
            if pending:
                self._heartbeats.check(self._actors)
        return list(ray.get(refs))

    def _teardown(self) -> None:
        with self._lock:
            actors, self._actors = self._actors, []
            pg, self._pg = self._pg, None
        release(actors, pg)
