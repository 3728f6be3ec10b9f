"""What each Pollux job's agent reports to the scheduler, in Pollux's simulator.

Pollux's agent (AdaptDL) profiles the job as it runs: every (nodes, replicas, micro-batch)
shape it has trained at, with the step and sync times it measured there, and the gradient
noise of the current epoch at the current batch. The scheduler fits its step-time model to
that profile, so a job that has only run on one GPU is believed to scale perfectly until it
has tried more (petuum/adaptdl, osdi21-artifact ``simulator/simulator.py``, read for its
meaning). :class:`PolluxAgents` plays those agents for a replay:

- the step times a job "measures" are the application's measured ones
  (:meth:`jigsaw.traces.pollux_apps.PolluxApp.step_sync`) at the shape it runs now;
- the noise is the application's curve (``grad_sqr``, ``grad_var``) at the job's epoch and
  current global batch; the epoch comes from the iterations done at the last checkpoint
  plus what the gang has run since at its current speed;
- the step-time model is :func:`jigsaw.goodput.fit_step_times` on the job's own profile.
"""

from __future__ import annotations

from jigsaw.goodput.model import BatchLimits, GoodputModel
from jigsaw.goodput.noise import GradientNoise
from jigsaw.goodput.source import JobGoodput
from jigsaw.goodput.step_time import StepObservation, StepTimeModel, fit_step_times
from jigsaw.model.cluster import per_node_counts
from jigsaw.model.domain import Job
from jigsaw.model.lifecycle import JobState
from jigsaw.simulator.pollux_rate import PolluxRate

Shape = tuple[int, int, int]
"""(nodes, replicas, micro-batch samples): one entry of a job's profile."""


class PolluxAgents:
    def __init__(self, rate: PolluxRate) -> None:
        self._rate = rate
        self._profiles: dict[str, dict[Shape, StepObservation]] = {}
        self._fits: dict[str, tuple[int, StepTimeModel]] = {}

    def job_goodput(self, job: Job, now: float) -> JobGoodput | None:
        app = self._rate.apps.get(job.spec.model)
        if app is None or not job.spec.is_elastic:
            return None
        lowest, highest = job.spec.batch_range
        limits = BatchLimits(lowest, highest, app.min_local_bsz, app.max_local_bsz)
        profile = self._profiles.setdefault(job.id, {})
        running = job.state is JobState.RUNNING and bool(job.placement)
        per_node = per_node_counts(job.placement) if running else ()
        epoch = self._epoch(job, per_node, now)
        batch = self._batch(job, per_node, epoch)
        if running:
            self._measure(job, per_node, batch, profile)
        if not profile:
            return JobGoodput(limits, None, 0)
        grad_sqr, grad_var = app.curves.grad_stats(batch, epoch)
        noise = GradientNoise.at_batch(grad_sqr, grad_var, app.curves.init_batch_size)
        model = GoodputModel(self._step_times(job, profile), noise, limits)
        return JobGoodput(limits, model, max(shape[1] for shape in profile))

    def _epoch(self, job: Job, per_node: tuple[int, ...], now: float) -> int:
        """The job's epoch now: at its last checkpoint, plus what its gang has run since."""
        work = self._rate.work(job)
        done = job.iterations_done
        if per_node and job.run_started_at is not None:
            speed = self._rate.speed(job, per_node)
            done = min(done + speed * max(now - job.run_started_at, 0.0), work.total)
        return work.epoch_at(done)

    def _batch(self, job: Job, per_node: tuple[int, ...], epoch: int) -> int:
        """The global batch the job runs now (its last one when it is not running), within
        the validated range its noise is known for."""
        app = self._rate.apps[job.spec.model]
        if per_node and job.worker_batch is not None and job.spec.batch_policy == "adaptive":
            batch = self._rate.adaptive_batch(job, per_node, epoch)
        else:
            workers = sum(per_node) or (job.plan.num_workers if job.plan else job.spec.workers)
            batch = app.split(workers, workers * job.current_worker_batch).batch
        return min(max(batch, app.curves.init_batch_size), app.curves.max_batch_size)

    def _measure(
        self, job: Job, per_node: tuple[int, ...], batch: int, profile: dict[Shape, StepObservation]
    ) -> None:
        app = self._rate.apps[job.spec.model]
        workers = sum(per_node)
        split = app.split(workers, batch)
        shape = (len(per_node), workers, split.atomic)
        if shape not in profile:
            step, sync = app.step_sync(per_node, split.atomic)
            profile[shape] = StepObservation(
                shape[0], workers, split.atomic, step, min(sync, 0.999 * step)
            )

    def _step_times(self, job: Job, profile: dict[Shape, StepObservation]) -> StepTimeModel:
        """Refitted whenever the profile has grown."""
        cached = self._fits.get(job.id)
        if cached is None or cached[0] != len(profile):
            cached = self._fits[job.id] = (len(profile), fit_step_times(list(profile.values())))
        return cached[1]
