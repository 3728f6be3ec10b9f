"""The co-location model: what each gang's iteration time becomes when gangs share GPUs.

One model, used by the policies (through the oracle), by the simulated executor under every
trace semantics and by the service's simulated executor. The cluster's hardware says how a
GPU is shared (``JIGSAW_SHARING``, ``jigsaw-cli simulate --sharing``):

- ``timeslice`` (the default): turns at iteration boundaries, GPU time conserved
  (:mod:`jigsaw.oracle.timeslicing`);
- ``concurrent``: space sharing, as Gavel measured and as CUDA MPS gives, predicted from the
  jobs' profiles by a fit on Gavel's measured pairs (:mod:`jigsaw.oracle.colocation_concurrent`).

``interference`` (``JIGSAW_INTERFERENCE``, ``--interference``; 0 by default) is a penalty
on top of either mode for the sensitivity rows: every gang that shares a GPU runs at
``1 - interference`` of the rate the mode predicts (its iteration time divided by it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from jigsaw.model.environment import INTERFERENCE_MAX, SHARING_DEFAULT, SHARING_MODES
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.hardware import HardwareSpec
from jigsaw.oracle.colocation_concurrent import (
    ConcurrentFit,
    concurrent_iteration_times,
    load_fit,
)
from jigsaw.oracle.gang_timing import GangTiming
from jigsaw.oracle.timeslicing import timesliced_iteration_times

DEFAULT_SHARING = SHARING_DEFAULT
MAX_INTERFERENCE = INTERFERENCE_MAX


@dataclass(frozen=True, slots=True)
class SharingSettings:
    """How the hardware shares a GPU, and the interference penalty on shared rates."""

    mode: str = DEFAULT_SHARING
    interference: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in SHARING_MODES:
            raise InvalidSpecError(
                f"unknown sharing mode {self.mode!r}; choose one of: {', '.join(SHARING_MODES)}",
                field="sharing",
            )
        if (
            isinstance(self.interference, bool)
            or not isinstance(self.interference, int | float)
            or not math.isfinite(self.interference)
            or not 0.0 <= self.interference <= MAX_INTERFERENCE
        ):
            raise InvalidSpecError(
                f"interference must be a number from 0 to {MAX_INTERFERENCE} (the share of "
                f"a shared rate lost), got {self.interference!r}",
                field="interference",
            )


class ColocationModel:
    """Iteration times of gangs that share GPUs, under one cluster's sharing settings."""

    def __init__(
        self,
        hardware: HardwareSpec,
        settings: SharingSettings | None = None,
        fit: ConcurrentFit | None = None,
    ) -> None:
        self.hardware = hardware
        self.settings = settings if settings is not None else SharingSettings()
        self._fit = fit

    @property
    def fit(self) -> ConcurrentFit:
        """The concurrent-sharing fit of this GPU type (read on first use)."""
        if self._fit is None:
            self._fit = load_fit(self.hardware)
        return self._fit

    def iteration_times(self, gangs: Mapping[str, GangTiming]) -> dict[str, float]:
        """Iteration time of every gang in ``gangs`` given that they share GPUs as their
        ``busy_s`` say. Gangs sharing nothing keep ``alone_s`` exactly."""
        if self.settings.mode == "concurrent":
            times = concurrent_iteration_times(gangs, self.fit)
        else:
            times = timesliced_iteration_times(gangs)
        keep = 1.0 - self.settings.interference
        if keep < 1.0:
            for job_id in _sharing(gangs):
                times[job_id] /= keep
        return times

    def shared_fractions(self, gangs: Mapping[str, GangTiming]) -> dict[str, float]:
        """Each gang's shared rate as a fraction of its solo rate."""
        times = self.iteration_times(gangs)
        return {job_id: gangs[job_id].alone_s / times[job_id] for job_id in gangs}


def _sharing(gangs: Mapping[str, GangTiming]) -> set[str]:
    seen: dict[object, str] = {}
    sharing: set[str] = set()
    for job_id in sorted(gangs):
        for gpu, _ in gangs[job_id].busy_s:
            first = seen.setdefault(gpu, job_id)
            if first != job_id:
                sharing.update((first, job_id))
    return sharing
