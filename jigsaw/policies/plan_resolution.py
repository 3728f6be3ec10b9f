"""How a policy that does not choose plans (fifo, las, maxmin) turns a job's request into a
:data:`~jigsaw.plan.Plan`: the one place that asks for the model's block count K.

The plan *type* comes first: a job whose ``parallelism`` resolves to a pipeline or a hybrid
(:class:`~jigsaw.oracle.plan_choice.PlanTypeChooser`) starts with that plan; every other job
is data parallel and its ``spb`` request resolves against K. The chooser is the process's
(:func:`configure_plan_types`: the service sets the GPU type and ``JIGSAW_WORKER_MEMORY_GIB``
at start; unset, a v100 and its memory) unless one is passed.
"""

from __future__ import annotations

from collections.abc import Callable

from jigsaw.domain import Job
from jigsaw.environment import GPU_TYPE_DEFAULT
from jigsaw.hardware import preset
from jigsaw.oracle.plan_choice import PlanTypeChooser
from jigsaw.plan import Plan, full_backprop

BlocksOf = Callable[[str], int | None]
"""A model's block count K, or ``None`` while it is unknown (an entrypoint model before a
worker has built it)."""


def job_blocks(job: Job, blocks_of: BlocksOf) -> int | None:
    """K as a worker reported it for this job, else as the catalog knows it."""
    return job.model_blocks if job.model_blocks is not None else blocks_of(job.spec.model)


_CHOOSER: PlanTypeChooser | None = None


def configure_plan_types(chooser: PlanTypeChooser | None) -> None:
    """Set the process's plan-type chooser (``None``: back to the default)."""
    global _CHOOSER
    _CHOOSER = chooser


def plan_types() -> PlanTypeChooser:
    """The process's plan-type chooser."""
    global _CHOOSER
    if _CHOOSER is None:
        _CHOOSER = PlanTypeChooser(preset(GPU_TYPE_DEFAULT))
    return _CHOOSER


def resolve_for(job: Job, blocks_of: BlocksOf, chooser: PlanTypeChooser | None = None) -> Plan:
    """The plan to start ``job`` with: the one it ran before (a resumed job keeps it), else its
    request resolved against K. Before K is known the job starts with full backprop over the
    model taken as one block, which means the same at every K; the worker resolves the request
    against the model it built (docs/ARCHITECTURE.md, "A plan's one path")."""
    if job.plan is not None:
        return job.plan
    if job.spec.parallelism != "data":
        typed = (chooser or plan_types()).plan_for(job.spec)
        if typed is not None:
            return typed
    blocks = job_blocks(job, blocks_of)
    if blocks is None:
        return full_backprop(job.spec.workers, 1)
    return job.spec.plan_request.resolve(job.spec.workers, blocks)
