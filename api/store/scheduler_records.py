"""Reads of what the scheduler records (its leader row, the node inventory, progress and
utilization samples), so the routers never run SQL themselves. :class:`api.store.SqlStore`
exposes them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, select

from api.models import nodes, progress_samples, scheduler_leader, utilization_samples


@dataclass(frozen=True, slots=True)
class LeaderState:
    policy: str | None
    round: int
    epoch: int
    heartbeat_at: float | None
    last_round_at: float | None
    last_round_latency_s: float | None
    last_decisions: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class UtilizationPoint:
    at: float
    busy_gpus: int
    total_gpus: int


@dataclass(frozen=True, slots=True)
class GpuTotals:
    recorded: int
    """GPUs of every node the scheduler recorded, alive or not (0: none recorded yet)."""
    alive: int


def leader_state(engine: Engine) -> LeaderState | None:
    with engine.connect() as conn:
        row = conn.execute(select(scheduler_leader)).mappings().first()
    if row is None:
        return None
    return LeaderState(
        policy=row["policy"],
        round=row["round"],
        epoch=row["epoch"],
        heartbeat_at=row["heartbeat_at"],
        last_round_at=row["last_round_at"],
        last_round_latency_s=row["last_round_latency_s"],
        last_decisions=list(row["last_decisions"] or []),
    )


def gpu_totals(engine: Engine) -> GpuTotals:
    recorded = alive = 0
    with engine.connect() as conn:
        for row in conn.execute(select(nodes.c.num_gpus, nodes.c.alive)):
            recorded += row.num_gpus
            alive += row.num_gpus if row.alive else 0
    return GpuTotals(recorded, alive)


def observed_rates(engine: Engine, job_ids: Sequence[str]) -> dict[str, float]:
    """Iterations per second each job last reported, where it did."""
    if not job_ids:
        return {}
    latest = (
        select(progress_samples.c.job_id, progress_samples.c.metrics)
        .where(progress_samples.c.job_id.in_(job_ids))
        .order_by(progress_samples.c.id.desc())
        .limit(len(job_ids) * 4)
    )
    rates: dict[str, float] = {}
    with engine.connect() as conn:
        for row in conn.execute(latest):
            value = (row.metrics or {}).get("iterations_per_s")
            if row.job_id not in rates and isinstance(value, int | float) and value > 0:
                rates[row.job_id] = float(value)
    return rates


def utilization_since(engine: Engine, start: float) -> list[UtilizationPoint]:
    """Every utilization sample taken at or after ``start``, oldest first."""
    query = (
        select(utilization_samples)
        .where(utilization_samples.c.at >= start)
        .order_by(utilization_samples.c.at)
    )
    with engine.connect() as conn:
        return [
            UtilizationPoint(row.at, row.busy_gpus, row.total_gpus) for row in conn.execute(query)
        ]
