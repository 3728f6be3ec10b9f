"""How a policy that does not choose plans (fifo, las, maxmin) turns a job's request into a
:data:`~jigsaw.plan.Plan`: the one place that asks for the model's block count K."""

from __future__ import annotations

from collections.abc import Callable

from jigsaw.domain import Job
from jigsaw.plan import Plan, full_backprop

BlocksOf = Callable[[str], int | None]
"""A model's block count K, or ``None`` while it is unknown (an entrypoint model before a
worker has built it)."""


def job_blocks(job: Job, blocks_of: BlocksOf) -> int | None:
    """K as a worker reported it for this job, else as the catalog knows it."""
    return job.model_blocks if job.model_blocks is not None else blocks_of(job.spec.model)


def resolve_for(job: Job, blocks_of: BlocksOf) -> Plan:
    """The plan to start ``job`` with: the one it ran before (a resumed job keeps it), else its
    request resolved against K. Before K is known the job starts with full backprop over the
    model taken as one block, which means the same at every K; the worker resolves the request
    against the model it built (docs/ARCHITECTURE.md, "A plan's one path")."""
    if job.plan is not None:
        return job.plan
    blocks = job_blocks(job, blocks_of)
    if blocks is None:
        return full_backprop(job.spec.workers, 1)
    return job.spec.plan_request.resolve(job.spec.workers, blocks)
