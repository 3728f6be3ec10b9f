"""Gang speed under Pollux's semantics: measured step times, fixed batch, no eta.

A Pollux job's work (``iterations``) already counts statistical efficiency at its batch
(:meth:`jigsaw.traces.pollux_apps.PolluxApp.iterations`), so the rate here is plain
iterations per second: ``1 / PolluxApp.iteration_s`` at the gang's per-node GPU counts. SPB
plans do not change it (Pollux applications have no SPB profile). Gangs that share a GPU
(only the jigsaw policy packs) slow down as in :class:`jigsaw.rate_executor.ConstantRate`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from jigsaw.cluster import GpuId, Placement
from jigsaw.domain import Job
from jigsaw.errors import InvalidSpecError
from jigsaw.plan import Plan
from jigsaw.traces.pollux_apps import PolluxApp


class PolluxRate:
    def __init__(self, apps: Mapping[str, PolluxApp], gpus_per_node: int) -> None:
        self.apps = dict(apps)
        self.gpus_per_node = gpus_per_node
        self._speed: dict[tuple[str, int, int, tuple[int, ...]], float] = {}

    def _app(self, job: Job) -> PolluxApp:
        try:
            return self.apps[job.spec.model]
        except KeyError:
            raise InvalidSpecError(
                f"job {job.id}: {job.spec.model!r} is not a Pollux application with curves"
            ) from None

    def iterations_per_second(self, job: Job, per_node: tuple[int, ...]) -> float:
        key = (job.spec.model, job.spec.workers, job.spec.batch_size, per_node)
        speed = self._speed.get(key)
        if speed is None:
            app = self._app(job)
            split = app.split(job.spec.workers, job.spec.batch_size * job.spec.workers)
            speed = self._speed[key] = 1.0 / app.iteration_s(per_node, split)
        return speed

    def rate(
        self,
        job: Job,
        placement: Placement,
        plan: Plan,
        other_load: Mapping[GpuId, float],
    ) -> float:
        del plan
        slowdown = max((1.0 + other_load.get(gpu, 0.0) for gpu in placement), default=1.0)
        return self.iterations_per_second(job, per_node_counts(placement)) / slowdown

    def load(self, job: Job, placement: Placement, plan: Plan) -> dict[GpuId, float]:
        del job, plan
        return dict.fromkeys(placement, 1.0)

    def startup_s(self, job: Job) -> float:
        del job
        return 0.0

    def reference_rate(self, job: Job) -> float:
        """Alone on the fewest nodes (``gpus_per_node`` per node)."""
        workers, per_node = job.spec.workers, self.gpus_per_node
        compact = (per_node,) * (workers // per_node) + (
            (workers % per_node,) if workers % per_node else ()
        )
        return self.iterations_per_second(job, compact)


def per_node_counts(placement: Placement) -> tuple[int, ...]:
    """GPUs per node of a placement, in node order (``((0,0),(0,1),(3,0))`` -> ``(2, 1)``)."""
    counts = Counter(gpu[0] for gpu in set(placement))
    return tuple(counts[node] for node in sorted(counts))
