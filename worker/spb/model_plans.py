"""Plans named in words, resolved against a zoo model: for standalone tools (tests, benchmarks).

The trainer takes a resolved :class:`~jigsaw.model.plan.SPBPlan` only. The Ray runtime resolves a
job's plan once, against the model its workers built (:mod:`worker.runtime.spb_lease`); a tool
that names a plan (``"staircase"``, ``"0,1,1,3"``) resolves it here, against the same model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jigsaw.model.plan import PlanRequest, SPBPlan, resolve_plan
from worker.zoo import load_workload


def model_plan(
    spec: str | Sequence[int] | PlanRequest, world_size: int, model: str, **model_options: Any
) -> SPBPlan:
    """``spec`` for ``world_size`` workers over the K blocks of ``model`` as the zoo builds it."""
    blocks = len(load_workload(model, **model_options).blocks)
    return resolve_plan(spec, world_size, blocks)
