"""The service's simulated executor: every gang runs at the configured rate alone, and gangs
sharing a GPU are re-timed by the oracle's co-location model, the one the policy prices
packing with (:mod:`jigsaw.oracle.colocation`).

A gang of a model the oracle cannot price (an entry point without a profile, a plan whose
block count the workers have not reported yet) has no timing; the gangs it shares a GPU
with then fall back to :class:`~jigsaw.simulator.rate_model.ConstantRate`'s rule (divide by the
most loaded GPU's ``1 + others' load``).
"""

from __future__ import annotations

from collections.abc import Mapping

from jigsaw.model.cluster import GpuId, Placement
from jigsaw.model.domain import Job
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import Plan
from jigsaw.oracle import ColocationModel, GangTiming, Oracle
from jigsaw.simulator.rate_model import ConstantRate


class ColocatedConstantRate:
    def __init__(
        self, oracle: Oracle, iterations_per_second: float, startup_seconds: float = 0.0
    ) -> None:
        self.base = ConstantRate(iterations_per_second, startup_seconds)
        self.oracle = oracle
        self.colocation: ColocationModel = oracle.colocation
        self._alone_s: dict[str, float] = {}
        """Per job: the oracle's iteration time alone at its last ``timing``."""

    def rate(
        self, job: Job, placement: Placement, plan: Plan, other_load: Mapping[GpuId, float]
    ) -> float:
        return self.base.rate(job, placement, plan, other_load)

    def load(self, job: Job, placement: Placement, plan: Plan) -> dict[GpuId, float]:
        return self.base.load(job, placement, plan)

    def startup_s(self, job: Job) -> float:
        return self.base.startup_s(job)

    def timing(self, job: Job, placement: Placement, plan: Plan) -> GangTiming | None:
        try:
            timing = self.oracle.timing(job.spec.model, job.spec.batch_size, plan, placement)
        except InvalidSpecError:
            self._alone_s.pop(job.id, None)
            return None
        self._alone_s[job.id] = timing.alone_s
        return timing

    def rate_at(self, job: Job, plan: Plan, iteration_s: float) -> float:
        """The configured rate times the co-location model's fraction of it."""
        del plan
        return self.base.iterations_per_second * self._alone_s[job.id] / iteration_s
