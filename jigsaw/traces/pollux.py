"""Reader for Pollux workloads (``name,time,application,num_replicas,batch_size``).

``batch_size`` in these files is the job's *global* batch; the ``TraceJob`` carries the
local batch ``ceil(batch_size / num_replicas)``. The files give no run length, so
``iterations`` is the work to reach the application's target, from the approximate epochs
table below (docs/ORACLE.md, "Pollux workloads"): ``ceil(epochs * dataset / global batch)``.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from jigsaw.errors import TraceFormatError
from jigsaw.profiles import POLLUX_APPS
from jigsaw.traces.record import TraceJob, parse_non_negative_float, parse_positive_int

COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")

# (training samples per epoch, epochs to target). Approximate: dataset sizes are public, the
# epoch counts are typical published recipes, not read from the Pollux artifact.
TARGET_WORK: dict[str, tuple[int, int]] = {
    "cifar10": (50_000, 100),
    "imagenet": (1_281_167, 90),
    "bert": (88_641, 2),
    "deepspeech2": (1_132, 80),
    "ncf": (994_169, 10),
    "yolov3": (16_551, 50),
}


def read_pollux(path: str | Path) -> list[TraceJob]:
    label = str(path)
    jobs = []
    with Path(path).open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header) != COLUMNS:
            raise TraceFormatError(label, 1, f"expected header {','.join(COLUMNS)}")
        for line, fields in enumerate(reader, start=2):
            if not fields:
                continue
            if len(fields) != len(COLUMNS):
                raise TraceFormatError(label, line, f"expected 5 fields, found {len(fields)}")
            name, time_text, app, replicas_text, batch_text = (f.strip() for f in fields)
            if app not in POLLUX_APPS:
                raise TraceFormatError(
                    label, line, f"unknown application {app!r}; expected {', '.join(POLLUX_APPS)}"
                )
            if not name:
                raise TraceFormatError(label, line, "job name is empty")
            replicas = parse_positive_int(replicas_text, "num_replicas", label, line)
            global_batch = parse_positive_int(batch_text, "batch_size", label, line)
            samples, epochs = TARGET_WORK[app]
            jobs.append(TraceJob(
                id=name,
                submit_time_s=parse_non_negative_float(time_text, "time", label, line),
                num_workers=replicas,
                model=app,
                batch_size=math.ceil(global_batch / replicas),
                iterations=math.ceil(epochs * samples / global_batch),
                original_model=app,
                source=f"{label}:{line}",
            ))
    jobs.sort(key=lambda job: job.submit_time_s)
    return jobs
