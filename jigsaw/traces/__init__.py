"""Workload trace readers. Each yields ``TraceJob`` records; ``load_trace`` picks the reader.

- ``philly.csv`` (``timestamp,duration,num_gpus,gpu_time,cluster``): ``read_philly``
- Pollux workloads (``name,time,application,num_replicas,batch_size``): ``read_pollux``
- Gavel ``.trace`` (10 tab-separated columns): ``read_gavel``; throughputs: ``GavelThroughputs``
- our JSON/YAML job lists: ``read_joblist``
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jigsaw.model.errors import TraceFormatError
from jigsaw.traces.gavel import GavelThroughputs, read_gavel
from jigsaw.traces.joblist import read_joblist
from jigsaw.traces.philly import read_philly
from jigsaw.traces.pollux import read_pollux
from jigsaw.traces.record import TraceJob

__all__ = [
    "GavelThroughputs",
    "TraceJob",
    "load_trace",
    "read_gavel",
    "read_joblist",
    "read_philly",
    "read_pollux",
]


def load_trace(path: str | Path, **options: Any) -> list[TraceJob]:
    """Read any supported trace, chosen by extension and (for CSV) by its header.

    ``options`` go to the chosen reader (Philly: ``start``, ``end``, ``limit``, ``seed``,
    ``oracle``, ``gpus_per_node``); readers without options refuse unexpected ones.
    """
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix == ".trace":
        return _call(read_gavel, target, options)
    if suffix in (".json", ".yaml", ".yml"):
        return _call(read_joblist, target, options)
    if suffix == ".csv":
        with target.open() as handle:
            header = handle.readline().strip().replace(" ", "")
        if header.startswith("timestamp,duration,num_gpus"):
            return read_philly(target, **options)
        if header.startswith("name,time,application"):
            return _call(read_pollux, target, options)
        raise TraceFormatError(str(target), 1, f"unrecognised CSV header {header!r}")
    raise TraceFormatError(
        str(target),
        0,
        "unknown trace format: use .csv (Philly/Pollux), .trace (Gavel), .json/.yaml (job list)",
    )


def _call(reader: Any, path: Path, options: dict[str, Any]) -> list[TraceJob]:
    if options:
        raise TraceFormatError(
            str(path), 0, f"options {', '.join(sorted(options))} do not apply to this format"
        )
    jobs: list[TraceJob] = reader(path)
    return jobs
