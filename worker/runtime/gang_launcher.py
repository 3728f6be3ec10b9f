"""Launch one gang: reserve its placement group, start one actor per rank, rendezvous and set
every rank up (process group, trainer, restore), all within the startup deadline.

The :class:`~worker.runtime.gang.Gang` thread takes these steps one by one and holds what each
reserves, so that a kill from another thread releases it (:func:`release`) at any point.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from jigsaw.model.cluster import Placement
from jigsaw.model.plan import Plan, PlanRequest
from worker.runtime.checkpoints import CheckpointStore
from worker.runtime.failures import GangFailure, PlacementTimeout, diagnose
from worker.runtime.gang_worker import RemoteGangWorker
from worker.runtime.inventory import RayInventory
from worker.runtime.memory_limit import limit_bytes
from worker.runtime.messages import GangConfig
from worker.runtime.settings import RuntimeSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GangRequest:
    """What the executor asks a gang to run."""

    job_id: str
    attempt: int
    model: str
    placement: Placement
    plan: Plan
    batch_size: int
    learning_rate: float
    seed: int
    iterations: int
    plan_request: PlanRequest | None = None
    """The job's request, when the plan was resolved without knowing the model's K."""
    base_global_batch: int | None = None
    """``batch_policy: adaptive``: the global batch the learning rate was tuned for."""
    optimizer: str = "sgd"
    """The job's optimizer (:attr:`jigsaw.model.domain.JobSpec.optimizer`)."""


class GangLauncher:
    """The steps from a request to ranks ready at an iteration. ``check_killed`` raises when
    the gang was killed meanwhile; every wait calls it, so a kill ends a launch promptly."""

    def __init__(
        self,
        request: GangRequest,
        settings: RuntimeSettings,
        inventory: RayInventory,
        check_killed: Callable[[], None],
        *,
        placement_timeout_s: float | None = None,
    ) -> None:
        self.request = request
        self.settings = settings
        self._inventory = inventory
        self._check_killed = check_killed
        self._deadline = time.monotonic() + settings.startup_timeout_s
        self._placement_timeout_s = min(
            placement_timeout_s or settings.startup_timeout_s, settings.startup_timeout_s
        )
        self._placement_deadline = time.monotonic() + self._placement_timeout_s

    def reserve(self) -> PlacementGroup:
        """One bundle per worker with a GPU fraction, pinned to the Ray node the scheduler
        chose (``ray.io/node-id`` label selector): all or nothing."""
        settings, request = self.settings, self.request
        nodes = [self._inventory.node(gpu[0]) for gpu in request.placement]
        bundle: dict[str, float] = {"GPU": settings.gpu_per_worker}
        if settings.cpus_per_worker > 0:
            bundle["CPU"] = settings.cpus_per_worker
        group: PlacementGroup = placement_group(
            [dict(bundle) for _ in nodes],
            strategy="PACK",
            name=f"jigsaw-{request.job_id}-a{request.attempt}",
            bundle_label_selector=[{"ray.io/node-id": node.node_id} for node in nodes],
        )
        return group

    def wait_ready(self, pg: PlacementGroup) -> None:
        while True:
            self._check_killed()
            ready, _ = ray.wait([pg.ready()], timeout=1.0)
            if ready:
                return
            if time.monotonic() > self._placement_deadline:
                raise PlacementTimeout(
                    f"could not reserve {len(self.request.placement)} workers on nodes "
                    f"{sorted({g[0] for g in self.request.placement})} within "
                    f"{self._placement_timeout_s:.0f}s (node gone or GPUs busy)"
                )

    def start_actors(self, pg: PlacementGroup) -> list[Any]:
        """One :class:`~worker.runtime.gang_worker.GangWorker` per bundle, rank by rank."""
        settings = self.settings
        return [
            RemoteGangWorker.options(
                num_cpus=settings.cpus_per_worker,
                num_gpus=settings.gpu_per_worker,
                max_restarts=0,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=pg, placement_group_bundle_index=rank
                ),
                name=None,
            ).remote(rank, gpu[1])
            for rank, gpu in enumerate(self.request.placement)
        ]

    def set_up(self, actors: list[Any], plan: Plan) -> int:
        """Rank 0 picks the rendezvous address; every rank joins the process group, builds its
        trainer under ``plan`` and restores the latest checkpoint. Returns the iteration all
        ranks start at."""
        address = self._get(actors[0].rendezvous_address.remote(), "rendezvous")
        config = self._config(plan)
        starts = self._get_all([a.setup.remote(config, address) for a in actors], "setup")
        if len(set(starts)) != 1:
            raise GangFailure(f"ranks restored different iterations {starts}", retryable=True)
        return int(starts[0])

    def _config(self, plan: Plan) -> GangConfig:
        settings, request = self.settings, self.request
        latest = CheckpointStore(settings.checkpoint_dir, request.job_id).latest()
        return GangConfig(
            job_id=request.job_id,
            attempt=request.attempt,
            model=request.model,
            world_size=len(request.placement),
            plan=plan,
            batch_size=request.batch_size,
            learning_rate=request.learning_rate,
            seed=request.seed,
            iterations=request.iterations,
            checkpoint_root=str(settings.checkpoint_dir),
            restore_from=str(latest[1]) if latest else None,
            device=settings.device,
            threads=settings.threads_per_worker,
            control_every=settings.control_every,
            eval_samples=settings.eval_samples,
            checkpoints_kept=settings.checkpoints_kept,
            plan_request=request.plan_request,
            worker_memory_bytes=limit_bytes(settings.worker_memory_gib),
            base_global_batch=request.base_global_batch,
            optimizer=request.optimizer,
        )

    def _get(self, ref: ray.ObjectRef[Any], what: str) -> Any:
        return self._get_all([ref], what)[0]

    def _get_all(self, refs: list[ray.ObjectRef[Any]], what: str) -> list[Any]:
        pending = list(refs)
        while pending:
            self._check_killed()
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                raise GangFailure(
                    f"gang {what} did not finish within {self.settings.startup_timeout_s:.0f}s",
                    retryable=True,
                )
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=min(remaining, 1))
            for ref in ready:
                try:
                    ray.get(ref, timeout=0)
                except Exception as exc:
                    self._check_killed()
                    raise diagnose(exc, refs) from exc
        return list(ray.get(refs))


def release(actors: list[Any], pg: PlacementGroup | None) -> None:
    """Kill a gang's actors and remove its placement group (whatever of them exists)."""
    for actor in actors:
        try:
            ray.kill(actor, no_restart=True)
        except Exception as exc:  # already dead: nothing to release
            log.debug("kill of a gang actor failed: %s", exc)
    if pg is not None:
        try:
            remove_placement_group(pg)
        except Exception as exc:
            log.debug("removing placement group failed: %s", exc)
