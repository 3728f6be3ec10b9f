"""Gang speed under Pollux's semantics: measured step times, times the plan's eta.

A Pollux job's work (``iterations``) already counts statistical efficiency at its initial
batch (:meth:`jigsaw.traces.pollux_apps.PolluxApp.iterations`), so at its initial size and
batch the rate is plain iterations per second: ``1 / PolluxApp.iteration_s`` at the gang's
per-node GPU counts. At any other size or batch (an elastic job a policy started or
resized), the gang runs Pollux's split of its global batch at that placement's step time,
and its iterations are converted through statistical efficiency epoch by epoch
(:class:`jigsaw.traces.pollux_progress.JobWork`). Under ``batch_policy: adaptive`` the batch
is the goodput-optimal one of each epoch, as Pollux's agent re-chooses it between epochs
without a restart. The rate is the mean one that reaches the end exactly when that would,
and :meth:`PolluxRate.progress_curve` says where the gang stands on the way (its speed
changes by epoch), so a resize checkpoints exactly.

An SPB plan runs at full backprop's step time (the rank that trains every block sets the
pace) and makes ``eta(plan)`` of its progress per iteration: :meth:`PolluxRate.eta`, the
oracle's efficiency table (measured runs, else the conservative default; 1 under ``--eta
one``). ``--eta curve`` replaces that eta by the application's curve
(:mod:`jigsaw.simulator.curve_rates`), so SPB pays its statistical cost under every mode, as
it does under the oracle's rates. Full-backprop plans (everything Pollux itself runs) are
unchanged.

Gangs that share a GPU (only packing policies do) are re-timed by the oracle's co-location
model on the oracle's timings of their zoo models (:mod:`jigsaw.oracle.colocation`), the
ones the policy priced the packing with, and each keeps the fraction ``T_alone / T_shared``
of its measured speed, as :class:`~jigsaw.simulator.rates.GavelRate` does with Gavel's.
Built without an oracle, or for a model the oracle cannot price, it keeps the rule of
Pollux's own simulator (:class:`jigsaw.simulator.rate_model.ConstantRate`: divide by the most
loaded GPU's ``1 + others' load``); neither changes a replay without packing (Pollux's
fidelity runs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from jigsaw.goodput.model import CANDIDATE_BATCHES
from jigsaw.model.cluster import GpuId, Placement, per_node_counts
from jigsaw.model.domain import Job
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import Plan, SPBPlan
from jigsaw.oracle import GangTiming, Oracle
from jigsaw.traces.pollux_apps import PolluxApp
from jigsaw.traces.pollux_progress import JobWork


class PolluxRate:
    def __init__(
        self, apps: Mapping[str, PolluxApp], gpus_per_node: int, oracle: Oracle | None = None
    ) -> None:
        self.apps = dict(apps)
        self.gpus_per_node = gpus_per_node
        self.oracle = oracle
        self.colocation = oracle.colocation if oracle is not None else None
        self._timed_on: dict[str, tuple[Placement, float]] = {}
        """Per job: the placement and alone iteration time of its last ``timing``."""
        self._speed: dict[tuple[str, int, int, tuple[int, ...]], float] = {}
        self._work: dict[tuple[str, int, int], JobWork] = {}
        self._adaptive: dict[
            tuple[str, tuple[int, ...], tuple[int, int]], tuple[list[float], list[int]]
        ] = {}

    def eta(self, job: Job, plan: Plan) -> float:
        """Progress per iteration of ``plan`` relative to full backprop: the oracle's eta of
        an SPB plan; 1 for full backprop, other plan types, or without an oracle (Pollux's own
        simulator runs no SPB)."""
        if self.oracle is None or not isinstance(plan, SPBPlan) or plan.is_full_backprop:
            return 1.0
        return self.oracle.eta(job.spec.model, plan)

    def _app(self, job: Job) -> PolluxApp:
        try:
            return self.apps[job.spec.model]
        except KeyError:
            raise InvalidSpecError(
                f"job {job.id}: {job.spec.model!r} is not a Pollux application with curves"
            ) from None

    def speed(self, job: Job, per_node: tuple[int, ...]) -> float:
        """Iterations (as the job counts them) per second at ``per_node`` GPUs with the job's
        current per-worker batch, on average from its progress to its end; a job whose batch a
        policy manages (``worker_batch`` set) under ``batch_policy: adaptive`` re-chooses its
        batch each epoch, as Pollux's agent does, so it runs the goodput-optimal batch of
        every epoch at this placement."""
        costs = self._elastic_costs(job, per_node)
        if costs is None:
            return self.iterations_per_second(job, per_node)
        left = job.spec.iterations - job.iterations_done
        seconds = self.work(job).seconds_left(job.iterations_done, costs)
        return left / seconds if seconds > 0 else math.inf

    def progress_curve(
        self, job: Job, placement: Placement, plan: Plan
    ) -> Callable[[float], float] | None:
        """Where an elastic gang stands between re-ratings (its speed changes by epoch);
        ``None`` at the initial size and batch, whose rate is constant."""
        del plan
        costs = self._elastic_costs(job, per_node_counts(placement))
        if costs is None:
            return None
        return self.work(job).progress_curve(job.iterations_done, costs)

    def _elastic_costs(self, job: Job, per_node: tuple[int, ...]) -> list[float] | None:
        """Seconds per unit of progress in each epoch, for a gang off its initial size or
        batch; ``None`` on it (the plain rate of :meth:`iterations_per_second` applies)."""
        workers, batch = sum(per_node), job.current_worker_batch
        adaptive = job.worker_batch is not None and job.spec.batch_policy == "adaptive"
        if workers == job.spec.workers and batch == job.spec.batch_size and not adaptive:
            return None
        work = self.work(job)
        if adaptive:
            return self._adaptive_costs(job, per_node, work)
        app = self._app(job)
        split = app.split(workers, batch * workers)
        return work.costs_at(split.batch, app.iteration_s(per_node, split))

    def adaptive_batch(self, job: Job, per_node: tuple[int, ...], epoch: int) -> int:
        """The global batch an adaptive job's agent runs in ``epoch`` at ``per_node``."""
        return self._adaptive_choice(job, per_node, self.work(job))[1][epoch]

    def _adaptive_costs(self, job: Job, per_node: tuple[int, ...], work: JobWork) -> list[float]:
        return self._adaptive_choice(job, per_node, work)[0]

    def _adaptive_choice(
        self, job: Job, per_node: tuple[int, ...], work: JobWork
    ) -> tuple[list[float], list[int]]:
        """Per epoch, the fewest seconds per unit of progress over Pollux's candidate batches
        at this placement (50 global batches, geometric over the job's range), and the batch
        that gives them."""
        key = (job.spec.model, per_node, job.spec.batch_range)
        choice = self._adaptive.get(key)
        if choice is None:
            app = self._app(job)
            workers = sum(per_node)
            lowest, highest = job.spec.batch_range
            lowest = max(lowest, app.min_local_bsz * workers)
            candidates = np.geomspace(lowest, max(highest, lowest), CANDIDATE_BATCHES)
            costs: list[float] = []
            batches: list[int] = []
            for global_batch in sorted({math.ceil(b - 1e-8) for b in candidates}):
                split = app.split(workers, global_batch)
                if split.atomic < app.min_local_bsz and costs:
                    continue
                here = work.costs_at(split.batch, app.iteration_s(per_node, split))
                if not costs:
                    costs, batches = here, [split.batch] * len(here)
                    continue
                for e, cost in enumerate(here):
                    if cost < costs[e]:
                        costs[e], batches[e] = cost, split.batch
            choice = self._adaptive[key] = (costs, batches)
        return choice

    def work(self, job: Job) -> JobWork:
        """The job's work, counted at its initial global batch."""
        key = (job.spec.model, job.spec.workers, job.spec.batch_size)
        work = self._work.get(key)
        if work is None:
            app = self._app(job)
            initial = app.split(job.spec.workers, job.spec.global_batch).batch
            work = self._work[key] = JobWork(app.curves, initial, job.spec.iterations)
        return work

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
        slowdown = max((1.0 + other_load.get(gpu, 0.0) for gpu in placement), default=1.0)
        return self.speed(job, per_node_counts(placement)) * self.eta(job, plan) / slowdown

    def load(self, job: Job, placement: Placement, plan: Plan) -> dict[GpuId, float]:
        del job, plan
        return dict.fromkeys(placement, 1.0)

    def timing(self, job: Job, placement: Placement, plan: Plan) -> GangTiming | None:
        """The oracle's timing of the gang's zoo model on this placement: the policy prices
        packing from the same one, so the fraction of its speed a shared gang keeps is the
        one the policy predicted; ``None`` without an oracle or for a model it cannot price
        (then ``rate`` applies Pollux's own rule)."""
        if self.oracle is None:
            return None
        try:
            timing = self.oracle.timing(job.spec.model, job.spec.batch_size, plan, placement)
        except InvalidSpecError:
            return None
        self._timed_on[job.id] = (placement, timing.alone_s)
        return timing

    def rate_at(self, job: Job, plan: Plan, iteration_s: float) -> float:
        """The gang's measured speed now times the co-location model's fraction of it, times
        the plan's eta."""
        placement, alone = self._timed_on[job.id]
        speed = self.speed(job, per_node_counts(placement))
        return speed * self.eta(job, plan) * alone / iteration_s

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
