"""Per-job telemetry: progress samples, log lines and the last loss.

Every progress report is stored, but a job keeps at most ``cap`` samples: past the cap the
older half is thinned to every other sample, always keeping lease-boundary samples (the ones
a training run reports at its checkpoints).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, delete, func, insert, select

from api.db import autocommit, writer
from api.models import job_log_lines, progress_samples


@dataclass(frozen=True, slots=True)
class ProgressSample:
    job_id: str
    attempt: int
    iteration: float
    at: float
    loss: float | None
    throughput: float | None
    plan: tuple[int, ...]
    metrics: dict[str, Any]
    lease_boundary: bool


@dataclass(frozen=True, slots=True)
class LogLine:
    seq: int
    at: float
    line: str


class Telemetry:
    def __init__(self, engine: Engine, *, cap_per_job: int = 2000) -> None:
        self._writer = writer(engine)
        self._autocommit = autocommit(engine)
        self._cap = cap_per_job

    def record(self, sample: ProgressSample, log_line: str | None = None) -> None:
        with self._writer.begin() as conn:
            conn.execute(
                insert(progress_samples).values(
                    job_id=sample.job_id,
                    attempt=sample.attempt,
                    iteration=sample.iteration,
                    at=sample.at,
                    loss=_finite(sample.loss),
                    throughput=_finite(sample.throughput),
                    plan=list(sample.plan),
                    metrics=_json_safe(sample.metrics),
                    lease_boundary=sample.lease_boundary,
                )
            )
            if log_line is not None:
                conn.execute(
                    insert(job_log_lines).values(job_id=sample.job_id, at=sample.at, line=log_line)
                )
            count = conn.execute(
                select(func.count()).where(progress_samples.c.job_id == sample.job_id)
            ).scalar_one()
            if count > self._cap:
                self._thin(conn, sample.job_id, count)

    def _thin(self, conn: Any, job_id: str, count: int) -> None:
        older = (
            select(progress_samples.c.id, progress_samples.c.lease_boundary)
            .where(progress_samples.c.job_id == job_id)
            .order_by(progress_samples.c.id)
            .limit(count // 2)
        )
        doomed = [
            row.id
            for index, row in enumerate(conn.execute(older))
            if index % 2 == 1 and not row.lease_boundary
        ]
        if doomed:
            conn.execute(delete(progress_samples).where(progress_samples.c.id.in_(doomed)))

    def add_log_lines(self, job_id: str, at: float, lines: Iterable[str]) -> None:
        rows = [{"job_id": job_id, "at": at, "line": line} for line in lines]
        if rows:
            with self._writer.begin() as conn:
                conn.execute(insert(job_log_lines), rows)

    def progress(self, job_id: str, *, after_iteration: float | None, limit: int) -> list[Any]:
        query = select(progress_samples).where(progress_samples.c.job_id == job_id)
        if after_iteration is not None:
            query = query.where(progress_samples.c.iteration > after_iteration)
        query = query.order_by(progress_samples.c.iteration, progress_samples.c.id).limit(limit)
        with self._autocommit.connect() as conn:
            return list(conn.execute(query).mappings())

    def logs(
        self,
        job_id: str,
        *,
        after: int,
        limit: int,
        since: float | None = None,
        tail: int | None = None,
    ) -> list[LogLine]:
        """Lines after sequence number ``after`` (and at or after ``since``), oldest first:
        the first ``limit`` of them, or with ``tail`` the last ``tail``."""
        query = select(job_log_lines.c.id, job_log_lines.c.at, job_log_lines.c.line).where(
            job_log_lines.c.job_id == job_id, job_log_lines.c.id > after
        )
        if since is not None:
            query = query.where(job_log_lines.c.at >= since)
        if tail is not None:
            query = query.order_by(job_log_lines.c.id.desc()).limit(tail)
        else:
            query = query.order_by(job_log_lines.c.id).limit(limit)
        with self._autocommit.connect() as conn:
            lines = [LogLine(row.id, row.at, row.line) for row in conn.execute(query)]
        return lines[::-1] if tail is not None else lines

    def last_losses(self, job_ids: Sequence[str]) -> dict[str, float]:
        if not job_ids:
            return {}
        latest = (
            select(func.max(progress_samples.c.id))
            .where(progress_samples.c.job_id.in_(job_ids), progress_samples.c.loss.is_not(None))
            .group_by(progress_samples.c.job_id)
        )
        query = select(progress_samples.c.job_id, progress_samples.c.loss).where(
            progress_samples.c.id.in_(latest)
        )
        with self._autocommit.connect() as conn:
            return {row.job_id: row.loss for row in conn.execute(query)}


def _finite(value: float | None) -> float | None:
    if value is None or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _json_safe(value: Any) -> Any:
    """Metrics become JSON: non-finite floats become null, unknown objects their repr."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, bool | int | str):
        return value
    return repr(value)
