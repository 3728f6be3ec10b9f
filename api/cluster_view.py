"""The cluster as the API shows it: nodes from the inventory the scheduler records, GPUs
with the workers placed on them and the oracle's predicted load and memory of each."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import Engine, select

from api.models import allocations, jobs, nodes
from api.oracle_view import OracleView
from api.privacy import PrivacyMask
from api.schemas.cluster import GpuPublic, NodePublic, WorkerPublic
from api.store.codec import plan_from_column, spec_from_column
from jigsaw.model.lifecycle import JobState
from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from jigsaw.model.plan import Plan, SPBPlan

HOLDING = [JobState.ADMITTED.value, JobState.RUNNING.value]
UNKNOWN_LOAD = 1.0
"""A worker of a model without a profile is counted as filling its GPU (as the simulator does)."""


def list_nodes(engine: Engine) -> list[NodePublic]:
    with engine.connect() as conn:
        rows = conn.execute(select(nodes).order_by(nodes.c.index)).mappings()
        return [
            NodePublic(
                index=row["index"],
                name=row["name"],
                num_gpus=row["num_gpus"],
                gpu_type=row["gpu_type"],
                gpu_memory_bytes=row["gpu_memory_bytes"],
                alive=row["alive"],
            )
            for row in rows
        ]


def list_gpus(
    engine: Engine,
    oracle: OracleView,
    node_list: list[NodePublic],
    mask: PrivacyMask | None = None,
) -> list[GpuPublic]:
    """Every GPU with the workers on it; ``mask`` hides other users' jobs (api/privacy.py)."""
    query = (
        select(
            allocations.c.job_id,
            allocations.c.rank,
            allocations.c.node,
            allocations.c.gpu,
            jobs.c.name,
            jobs.c.spec,
            jobs.c.plan,
            jobs.c.placement,
        )
        .join(jobs, jobs.c.id == allocations.c.job_id)
        .where(jobs.c.state.in_(HOLDING))
        .order_by(allocations.c.job_id, allocations.c.rank)
    )
    workers: dict[tuple[int, int], list[WorkerPublic]] = defaultdict(list)
    with engine.connect() as conn:
        rows = list(conn.execute(query))
    for row in rows:
        spec = spec_from_column(row.spec)
        plan = plan_from_column(row.plan)
        placement = tuple((int(n), int(g)) for n, g in row.placement)
        estimate = oracle.worker(spec, plan, row.rank, placement)
        worker = WorkerPublic(
            job_id=row.job_id,
            job_name=row.name,
            rank=row.rank,
            depth=(
                plan.depths[row.rank]
                if isinstance(plan, SPBPlan) and row.rank < plan.num_workers
                else None
            ),
            role=worker_role(plan, row.rank),
            predicted_load=estimate.load,
            memory_bytes=estimate.memory_bytes,
        )
        workers[(row.node, row.gpu)].append(
            worker if mask is None else mask.worker(worker, spec.user)
        )
    gpus: list[GpuPublic] = []
    for node in node_list:
        for index in range(node.num_gpus):
            placed = workers.get((node.index, index), [])
            gpus.append(
                GpuPublic(
                    id=[node.index, index],
                    node=node.index,
                    load=sum(
                        w.predicted_load if w.predicted_load is not None else UNKNOWN_LOAD
                        for w in placed
                    ),
                    memory_used_bytes=sum(w.memory_bytes or 0 for w in placed),
                    memory_bytes=node.gpu_memory_bytes,
                    workers=placed,
                )
            )
    return gpus


def worker_role(plan: Plan | None, rank: int) -> str:
    """What one worker does in its job's plan, for people: ``depth 2`` (data parallel: its
    SPB stop depth), ``stage 2/4`` (pipeline; ``replica 1/2`` when there are several) or
    ``shard 3/4`` (hybrid: its slice of the sharded blocks)."""
    if isinstance(plan, SPBPlan) and rank < plan.num_workers:
        return f"depth {plan.depths[rank]}"
    if isinstance(plan, PipelinePlan):
        stage = f"stage {plan.stage_of(rank) + 1}/{plan.num_stages}"
        if plan.replicas > 1:
            stage += f" replica {plan.replica_of(rank) + 1}/{plan.replicas}"
        return stage
    if isinstance(plan, HybridPlan):
        return f"shard {rank + 1}/{plan.num_workers}"
    return "not planned"
