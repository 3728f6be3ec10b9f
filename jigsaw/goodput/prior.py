"""The oracle as the step-time model's prior: what a job's goodput is believed to be before it
has reported a single step time.

There is one step-time model (:class:`~jigsaw.goodput.step_time.StepTimeModel`, Pollux's
form) and one fit (:func:`~jigsaw.goodput.step_time.fit_step_times`). A job that has measured
shapes is fitted to them (:class:`~jigsaw.simulator.pollux_agents.PolluxAgents` in replay,
:class:`api.goodput_source.LeaseGoodputSource` in the service). Before its first report the
same fit runs on the oracle's predictions instead (:func:`oracle_step_times`): full backprop
of the job's model at a grid of shapes, on the oracle's hardware, so a policy can price
every job on one scale from its first round. The prior is only as good as the oracle's
profile of the model; ``bench/goodput_calibration.py`` prints its error against Pollux's
measurements beside the fitted model's.

:class:`OraclePriorSource` wraps any :class:`~jigsaw.goodput.source.GoodputSource`: what the
source has measured wins; where it has nothing (no report yet, a rigid job, no source at all)
the oracle's prior answers.
"""

from __future__ import annotations

import math

from jigsaw.goodput.model import BatchLimits, GoodputModel
from jigsaw.goodput.noise import GradientNoise
from jigsaw.goodput.source import GoodputSource, JobGoodput
from jigsaw.goodput.step_time import StepObservation, StepTimeModel, fit_step_times
from jigsaw.model.cluster import Placement
from jigsaw.model.domain import Job
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import full_backprop
from jigsaw.oracle import Oracle

SYNC_CAP = 0.999
"""A predicted sync at or above the step is clipped below it (the fit needs compute > 0)."""


def prior_replicas(most: int) -> list[int]:
    """Powers of two up to ``most``, and ``most`` itself."""
    sizes = [1 << k for k in range(max(most, 1).bit_length()) if 1 << k <= most]
    return sorted({*sizes, max(most, 1)})


def prior_placements(replicas: int, gpus_per_node: int) -> list[Placement]:
    """The compact placement of ``replicas`` workers and, where it differs, the same workers
    split over two nodes (so the prior sees the network across nodes at every size)."""
    compact = tuple((rank // gpus_per_node, rank % gpus_per_node) for rank in range(replicas))
    if replicas < 2:
        return [compact]
    split = tuple((rank % 2, rank // 2) for rank in range(replicas))
    spans = {len({gpu[0] for gpu in compact}), len({gpu[0] for gpu in split})}
    return [compact, split] if len(spans) == 2 else [compact]


def oracle_observations(
    oracle: Oracle,
    model: str,
    worker_batches: list[int],
    gpus_per_node: int,
    max_replicas: int,
) -> list[StepObservation]:
    """The oracle's full-backprop step and sync times of ``model`` at every shape of the
    grid, as the observations a job would have reported there."""
    blocks = oracle.num_blocks(model)
    observations = []
    for replicas in prior_replicas(max_replicas):
        plan = full_backprop(replicas, blocks)
        for placement in prior_placements(replicas, gpus_per_node):
            nodes = len({gpu[0] for gpu in placement})
            for batch in worker_batches:
                predicted = oracle.predict(model, batch, plan, placement)
                step = predicted.iteration_time_s
                compute = max(predicted.per_worker_compute_s)
                sync = min(max(step - compute, 0.0), SYNC_CAP * step)
                observations.append(StepObservation(nodes, replicas, batch, step, sync))
    return observations


def oracle_step_times(
    oracle: Oracle, model: str, worker_batch: int, gpus_per_node: int, max_replicas: int
) -> StepTimeModel:
    """The step-time model fitted to the oracle's predictions for ``model`` around
    ``worker_batch`` samples per worker (a half, one and two times it), on up to
    ``max_replicas`` workers. Raises :class:`InvalidSpecError` for a model the oracle
    cannot price."""
    batches = sorted({max(1, worker_batch // 2), worker_batch, 2 * worker_batch})
    return fit_step_times(
        oracle_observations(oracle, model, batches, gpus_per_node, max(max_replicas, 2))
    )


def default_limits(job: Job) -> BatchLimits:
    """A job's batch limits when no source gave any: its global batch range, any per-worker
    batch up to the largest global one, one pass per iteration."""
    lowest, highest = job.spec.batch_range
    return BatchLimits(lowest, highest, 1, highest, accumulation=False)


class OraclePriorSource:
    """What ``measured`` knows of a job, else the oracle's prior (module docstring)."""

    def __init__(
        self, oracle: Oracle, gpus_per_node: int, measured: GoodputSource | None = None
    ) -> None:
        self.oracle = oracle
        self.gpus_per_node = gpus_per_node
        self.measured = measured
        self._priors: dict[tuple[str, int, int], StepTimeModel | None] = {}

    def job_goodput(self, job: Job, now: float) -> JobGoodput | None:
        found = self.measured.job_goodput(job, now) if self.measured is not None else None
        if found is not None and found.model is not None:
            return found
        prior = self.prior(job)
        if prior is None:
            return found
        limits = found.limits if found is not None else default_limits(job)
        noise = GradientNoise.of_blocks(job.block_noise)
        measured_most = found.largest_measured if found is not None else 0
        return JobGoodput(limits, GoodputModel(prior, noise, limits), measured_most)

    def prior(self, job: Job) -> StepTimeModel | None:
        """The oracle's step-time model of the job's model (``None``: the oracle has no
        profile of it); one fit per (model, batch, most workers)."""
        spec = job.spec
        most = max(spec.worker_range[1], spec.workers)
        key = (spec.model, spec.batch_size, most)
        if key not in self._priors:
            try:
                self._priors[key] = oracle_step_times(
                    self.oracle, spec.model, spec.batch_size, self.gpus_per_node, most
                )
            except InvalidSpecError:
                self._priors[key] = None
        return self._priors[key]


def prior_speedup(model: StepTimeModel, replicas: int, worker_batch: int, per_node: int) -> float:
    """Samples/s on ``replicas`` compact workers over one worker, at ``worker_batch`` each:
    how the prior says the job scales (a figure to compare with measured placements)."""
    nodes = math.ceil(replicas / per_node)
    one = worker_batch / float(model.iteration_s(1, 1, worker_batch, 0))
    many = replicas * worker_batch / float(model.iteration_s(nodes, replicas, worker_batch, 0))
    return many / one
