"""Reader for Pollux workloads (``name,time,application,num_replicas,batch_size``).

``batch_size`` in these files is the job's *global* batch; the ``TraceJob`` carries the
local batch ``ceil(batch_size / num_replicas)``. The files give no run length: as in Pollux's
own simulator, a job ends after a fixed number of epochs of its application, and its
progress counts through statistical efficiency at its batch size. ``iterations`` is
therefore read from the application's validation curves in ``apps/`` beside the workload
(``<root>/workloads*/workload-N.csv`` -> ``<root>/apps/<app>/``):
``ceil(PolluxApp.iterations(num_replicas, batch_size))`` (docs/SCHEDULER.md, "Pollux
workloads"). A workload naming an application without curves is refused, with file and line.

The trace's ``num_replicas`` and ``batch_size`` are each job's *initial request*: policies
that keep sizes (fifo, las, maxmin, jigsaw) run it so. As in Pollux's simulator, a policy that
sizes jobs may run it on 1 up to :attr:`~jigsaw.traces.pollux_apps.PolluxApp.max_replicas`
GPUs at any global batch of the validated range (``batch_policy: adaptive``), except ncf,
which Pollux keeps at one replica and its trace batch (:meth:`PolluxApp.elasticity`).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from jigsaw.model.errors import TraceFormatError
from jigsaw.model.numerics import INTEGER_EPS
from jigsaw.model.profiles import POLLUX_APPS
from jigsaw.traces.pollux_apps import PolluxApp, app_has_data, find_apps_dir, load_pollux_app
from jigsaw.traces.record import TraceJob, parse_non_negative_float, parse_positive_int

COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")


def read_pollux(path: str | Path, *, apps_dir: str | Path | None = None) -> list[TraceJob]:
    label = str(path)
    apps_root = Path(apps_dir) if apps_dir is not None else find_apps_dir(Path(path))
    apps: dict[str, PolluxApp] = {}
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
            name, time_text, app_name, replicas_text, batch_text = (f.strip() for f in fields)
            if app_name not in POLLUX_APPS:
                raise TraceFormatError(
                    label,
                    line,
                    f"unknown application {app_name!r}; expected {', '.join(POLLUX_APPS)}",
                )
            if not name:
                raise TraceFormatError(label, line, "job name is empty")
            submitted = parse_non_negative_float(time_text, "time", label, line)
            replicas = parse_positive_int(replicas_text, "num_replicas", label, line)
            global_batch = parse_positive_int(batch_text, "batch_size", label, line)
            app = apps.get(app_name)
            if app is None:
                app = apps[app_name] = _load(apps_root, app_name, label, line)
            if not app.curves.init_batch_size <= global_batch <= app.curves.max_batch_size:
                raise TraceFormatError(
                    label,
                    line,
                    f"batch_size {global_batch} is outside the validated range "
                    f"{app.curves.init_batch_size}..{app.curves.max_batch_size} of {app_name}",
                )
            worker_batch = math.ceil(global_batch / replicas)
            jobs.append(
                TraceJob(
                    id=name,
                    submit_time_s=submitted,
                    num_workers=replicas,
                    model=app_name,
                    batch_size=worker_batch,
                    iterations=max(
                        1, math.ceil(app.iterations(replicas, global_batch) - INTEGER_EPS)
                    ),
                    original_model=app_name,
                    elasticity=app.elasticity(replicas, worker_batch),
                    source=f"{label}:{line}",
                )
            )
    jobs.sort(key=lambda job: job.submit_time_s)
    return jobs


def _load(apps_root: Path | None, app: str, label: str, line: int) -> PolluxApp:
    if apps_root is None or not app_has_data(apps_root, app):
        where = (
            f"in {apps_root / app}"
            if apps_root is not None
            else ("(no apps/ directory beside the workload)")
        )
        raise TraceFormatError(
            label,
            line,
            f"application {app!r} has no validation curves and step times {where}: "
            "need validation-<batch>.csv, placements.csv and scalability.csv",
        )
    return load_pollux_app(apps_root, app)
