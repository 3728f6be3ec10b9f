"""What a resize costs, in seconds the job makes no progress: the figure the priced elastic
rule (:mod:`jigsaw.policies.jigsaw_parts.resize_pricing`) weighs every resize against.

The estimate for a job is, first found:

1. the job's own last measured resize (``Job.resize_s``: from the cycle applying it to the new
   gang's ``Started`` report, on Ray as in the simulator's replay, which charges its
   ``OverheadModel.restart_s``);
2. the last one measured on another job of the same model in the snapshot the round decides
   from (a gang start costs about the same for every job of a model; read from the jobs'
   ``Job.resize_s`` each round, so the estimate is a function of the snapshot);
3. a prior from the model's checkpoint, fitted to the measured table on local Ray
   (docs/BENCHMARKS.md, "Elastic resize on local Ray"; ``bench/resize_cost_fit.py``): a gang
   start's floor, plus the checkpoint written and read back, plus up to one control interval
   of iterations (the old gang stops at its next control point).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from jigsaw.model.domain import Job
from jigsaw.model.errors import InvalidSpecError
from jigsaw.oracle import Oracle
from jigsaw.oracle.memory import optimizer_state_copies


@dataclass(frozen=True, slots=True)
class ResizeCostPrior:
    """``floor_s + s_per_gb x checkpoint GB + control_iterations x iteration_s``."""

    floor_s: float = 14.8
    """A gang start (placement group, actors, rendezvous, restore) whatever the model."""
    s_per_gb: float = 103.0
    """Checkpoint written by the old gang and read by every rank of the new one."""
    control_iterations: int = 25
    """The old gang reaches its next control point first (the runtime's ``control_every``)."""

    def __post_init__(self) -> None:
        if min(self.floor_s, self.s_per_gb, self.control_iterations) < 0:
            raise ValueError("the resize-cost prior's terms must be >= 0")

    def seconds(self, checkpoint_bytes: float, iteration_s: float) -> float:
        return (
            self.floor_s
            + self.s_per_gb * checkpoint_bytes / 1e9
            + self.control_iterations * iteration_s
        )


class ResizeCosts:
    """Per-job and per-model resize-cost estimates, read from the jobs' measured resizes.

    A value: :meth:`seeing` gives the estimates for one snapshot's jobs, and nothing is
    learned or kept while a policy decides."""

    def __init__(
        self,
        oracle: Oracle,
        prior: ResizeCostPrior,
        measured_by_model: Mapping[str, float] | None = None,
    ) -> None:
        self.oracle = oracle
        self.prior = prior
        self._by_model: Mapping[str, float] = MappingProxyType(dict(measured_by_model or {}))

    def seeing(self, jobs: Iterable[Job]) -> ResizeCosts:
        """These estimates with ``jobs``' measured resizes as each model's (the one measured
        last wins; a new object, this one is unchanged)."""
        return ResizeCosts(self.oracle, self.prior, measured_by_model(jobs))

    def estimate_s(self, job: Job, iteration_s: float) -> float:
        """Seconds a resize of ``job`` is expected to cost (``iteration_s``: its current
        iteration time, for the wait for the next control point)."""
        if job.resize_s is not None:
            return job.resize_s
        measured = self._by_model.get(job.spec.model)
        if measured is not None:
            return measured
        return self.prior.seconds(self.checkpoint_bytes(job.spec.model), iteration_s)

    def checkpoint_bytes(self, model: str) -> float:
        """The weights and the optimizer's state (SGD with momentum: one copy); 0 for a model
        the oracle has no profile of (the floor alone prices it)."""
        try:
            params = self.oracle.profiles.get(model).param_bytes
        except InvalidSpecError:
            return 0.0
        return float(params * (1 + optimizer_state_copies()))


def measured_by_model(jobs: Iterable[Job]) -> dict[str, float]:
    """Per model, the resize measured last (when it ended: ``resized_at + resize_s``) among
    ``jobs``, ties to the later job in their order."""
    latest: dict[str, tuple[float, float]] = {}
    for job in jobs:
        if job.resize_s is None:
            continue
        ended = (job.resized_at or 0.0) + job.resize_s
        kept = latest.get(job.spec.model)
        if kept is None or ended >= kept[0]:
            latest[job.spec.model] = (ended, job.resize_s)
    return {model: seconds for model, (_, seconds) in latest.items()}
