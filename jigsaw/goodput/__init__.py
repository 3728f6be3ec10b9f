"""The goodput model for size and batch: how fast a data-parallel job progresses on N workers
at a global batch B.

    goodput(N, placement, B) = samples/s(N, placement, B) x efficiency(B)

- :mod:`jigsaw.goodput.step_time`: seconds per iteration for any (nodes, replicas, micro-batch,
  accumulation steps), a compute + network model fitted to measured step and sync times
  (Pollux's form, OSDI 2021 section 3.2);
- :mod:`jigsaw.goodput.noise`: batch-size efficiency from the gradient-noise statistics a job
  measures (the same statistics SPB's eta comes from);
- :mod:`jigsaw.goodput.model`: the two together, and the goodput-optimal batch and
  micro-batch split for a size within a job's limits;
- :mod:`jigsaw.goodput.calibration`: the step-time model fitted to Pollux's ``placements.csv``
  and ``scalability.csv`` per application, with its held-out error;
- :mod:`jigsaw.goodput.prior`: the oracle as the prior of a job that has reported nothing
  (the same model fitted to the oracle's predictions);
- :mod:`jigsaw.goodput.spb`: an SPB plan's goodput on the same scale, ``x eta(plan)``;
- :mod:`jigsaw.goodput.source`: the seam through which policies learn what jobs measured.

The step-time model is the one every policy, simulator and the service uses for a job's
step times; the oracle's own per-application fit (:mod:`jigsaw.oracle.calibration`) only
calibrates the oracle's hardware constants.
"""

from jigsaw.goodput.model import BatchChoice, BatchLimits, GoodputModel
from jigsaw.goodput.noise import GradientNoise
from jigsaw.goodput.step_time import StepObservation, StepTimeModel, fit_step_times

__all__ = [
    "BatchChoice",
    "BatchLimits",
    "GoodputModel",
    "GradientNoise",
    "StepObservation",
    "StepTimeModel",
    "fit_step_times",
]
