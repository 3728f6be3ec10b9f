"""A job's plan as people read it, whatever its type: SPB stop depths for data parallelism,
stages for a pipeline, shards for a hybrid. Read from the job's ``plan_kind`` and
``plan_detail`` (the plan as the server stores it, :func:`jigsaw.model.plan.plan_from_json`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cli.formatting import format_plan
from jigsaw.model.errors import JigsawError
from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from jigsaw.model.plan import Plan, plan_from_json

DATA_KINDS = frozenset({"data", "spb"})
"""Data parallelism: ``spb`` is how servers spelled it before ``data``; both are read."""


def plan_kind(job: Mapping[str, Any]) -> str | None:
    """``data``, ``pipeline`` or ``hybrid`` of the plan the job runs (ran); ``None`` before
    it has one."""
    kind = job.get("plan_kind")
    if kind is None:
        return None
    return "data" if kind in DATA_KINDS else str(kind)


def chosen_kind(job: Mapping[str, Any]) -> str | None:
    """The plan type the job runs, or before it starts the one the oracle chose for it."""
    kind = plan_kind(job)
    if kind is not None:
        return kind
    types = job.get("plan_types") or {}
    chosen = types.get("chosen")
    return "data" if chosen in DATA_KINDS else chosen


def parsed_plan(job: Mapping[str, Any]) -> Plan | None:
    detail = job.get("plan_detail")
    if not isinstance(detail, Mapping):
        return None
    try:
        return plan_from_json(detail)
    except (JigsawError, KeyError, TypeError, ValueError):
        return None  # a plan this CLI does not know: the short label still names its kind


def short_plan(job: Mapping[str, Any]) -> str:
    """For a table cell: ``0,1,2,3``, ``pipeline 4 stages``, ``pipeline 2 stages x 2``,
    ``hybrid 4 shards``; ``-`` before the job has a plan."""
    kind = plan_kind(job)
    if kind is None or kind == "data":
        return format_plan(job.get("plan"))
    plan = parsed_plan(job)
    if isinstance(plan, PipelinePlan):
        replicas = f" x {plan.replicas}" if plan.replicas > 1 else ""
        return f"pipeline {plan.num_stages} stages{replicas}"
    if isinstance(plan, HybridPlan):
        return f"hybrid {plan.num_workers} shards"
    return kind


def long_plan(job: Mapping[str, Any], *, in_describe: bool = False) -> str:
    """For a job's summary: the plan type and the whole plan. ``in_describe``: the summary
    heads ``describe``, which shows the plan types itself."""
    kind = plan_kind(job)
    if kind is None:
        chosen = chosen_kind(job)
        if chosen is None:
            return "- (chosen at start)"
        if in_describe:
            return f"- (not started; the oracle chose {chosen}: plan types below)"
        return (
            f"- (not started; the oracle chose {chosen}: `jigsaw-cli describe {job.get('id')}` "
            "compares the plan types)"
        )
    if kind == "data":
        return f"data parallel, SPB stop depths {format_plan(job.get('plan'))}"
    plan = parsed_plan(job)
    return plan.describe() if plan is not None else kind


def worker_role(plan: Plan | None, rank: int, depths: list[int]) -> str:
    """What rank ``rank`` does: its stop depth, its pipeline stage (blocks) or its shard."""
    if isinstance(plan, PipelinePlan):
        stage = plan.stage_of(rank)
        first, last = plan.stages[stage]
        blocks = f"block {first}" if first == last else f"blocks {first}-{last}"
        role = f"stage {stage + 1}/{plan.num_stages} ({blocks})"
        if plan.replicas > 1:
            role += f", replica {plan.replica_of(rank) + 1}/{plan.replicas}"
        return role
    if isinstance(plan, HybridPlan):
        return f"shard {rank + 1}/{plan.num_workers}"
    return f"depth {depths[rank]}" if rank < len(depths) else "-"
