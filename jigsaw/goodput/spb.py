"""An SPB plan's goodput, on the goodput model's scale: ``samples/s x E(batch) x eta(plan)``.

eta has one source (:func:`jigsaw.efficiency.online.job_eta`): measured online from the
job's own per-block gradient noise once every block has been reported often enough, the
prior before (the oracle's efficiency table, :func:`jigsaw.efficiency.online.table_prior`,
or the conservative default). The estimate names its source, so a decision can say what
its eta rests on.
"""

from __future__ import annotations

from dataclasses import dataclass

from jigsaw.efficiency.model import Prior, default_prior
from jigsaw.efficiency.online import job_eta
from jigsaw.efficiency.table import EtaEstimate
from jigsaw.goodput.model import GoodputModel
from jigsaw.model.domain import Job
from jigsaw.model.plan import SPBPlan


@dataclass(frozen=True, slots=True)
class PlanGoodput:
    model: GoodputModel
    """The job's goodput model with ``eta`` applied (``best`` and ``best_many`` price the
    plan)."""
    eta: EtaEstimate
    """eta of the plan and where it came from (``online``, ``measured table``, ...)."""


def with_plan_eta(
    model: GoodputModel, job: Job, plan: SPBPlan, prior: Prior = default_prior
) -> PlanGoodput:
    """``model`` priced for ``job`` running ``plan``: full backprop keeps eta = 1."""
    estimate = job_eta(job, plan, prior)
    return PlanGoodput(model.with_eta(estimate.eta), estimate)
