"""Reader for the Philly per-job summary CSV (``timestamp,duration,num_gpus,gpu_time,cluster``).

Rows are not sorted in the file: jobs are sorted stably by (timestamp, line). Philly records
no model, so each job gets one from the seeded mix in ``model_mix``; with an oracle, its run
time becomes iterations at the oracle's full-backprop rate on a compact placement:
``iterations = max(1, round(duration_s * oracle.full_rate(model, batch, gpus, per_node)))``.
"""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

from jigsaw.model.errors import TraceFormatError
from jigsaw.model.profiles import analytic_profile
from jigsaw.oracle import Oracle
from jigsaw.traces.model_mix import assign_model
from jigsaw.traces.record import TraceJob, parse_non_negative_float, parse_positive_int

COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")


def read_philly(
    path: str | Path,
    *,
    start: str | dt.date | None = None,
    end: str | dt.date | None = None,
    limit: int | None = None,
    seed: int = 0,
    oracle: Oracle | None = None,
    gpus_per_node: int = 8,
) -> list[TraceJob]:
    """Jobs submitted in ``[start, end)`` (dates, e.g. ``"2017-10-02"``), first ``limit``.

    ``submit_time_s`` is relative to the first selected job.
    """
    label = str(path)
    window_start = _as_datetime(start, "start")
    window_end = _as_datetime(end, "end")
    rows: list[tuple[dt.datetime, int, float, int, str]] = []
    with Path(path).open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header[:5]) != COLUMNS:
            raise TraceFormatError(label, 1, f"expected header {','.join(COLUMNS)}")
        for line, fields in enumerate(reader, start=2):
            if not fields:
                continue
            if len(fields) != len(COLUMNS):
                raise TraceFormatError(label, line, f"expected 5 fields, found {len(fields)}")
            try:
                submitted = dt.datetime.fromisoformat(fields[0])
            except ValueError:
                raise TraceFormatError(
                    label, line, f"timestamp {fields[0]!r} is not 'YYYY-MM-DD HH:MM:SS'"
                ) from None
            if (window_start and submitted < window_start) or (
                window_end and submitted >= window_end
            ):
                continue
            duration = parse_non_negative_float(fields[1], "duration", label, line)
            gpus = parse_positive_int(fields[2], "num_gpus", label, line)
            rows.append((submitted, line, duration, gpus, fields[4]))
    rows.sort(key=lambda row: (row[0], row[1]))
    if limit is not None:
        rows = rows[: max(0, limit)]
    if not rows:
        return []
    origin = rows[0][0]
    rates: dict[tuple[str, int], float] = {}
    batches: dict[str, int] = {}
    jobs = []
    for submitted, line, duration, gpus, cluster in rows:
        model = assign_model(gpus, line, seed)
        batch = batches.get(model)
        if batch is None:
            batch = batches[model] = analytic_profile(model).default_batch_size
        iterations = None
        if oracle is not None:
            rate = rates.get((model, gpus))
            if rate is None:
                rate = rates[(model, gpus)] = oracle.full_rate(model, batch, gpus, gpus_per_node)
            iterations = max(1, round(duration * rate))
        jobs.append(
            TraceJob(
                id=f"philly-{line}",
                submit_time_s=(submitted - origin).total_seconds(),
                num_workers=gpus,
                model=model,
                batch_size=batch,
                duration_s=duration,
                iterations=iterations,
                user=cluster or None,
                source=f"{label}:{line}",
            )
        )
    return jobs


def _as_datetime(value: str | dt.date | None, what: str) -> dt.datetime | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        raise TraceFormatError(
            "<window>", 0, f"{what} {value!r} is not a date such as 2017-10-02"
        ) from None
