"""``jigsaw-cli simulate --jobs PATH``: every job's outcome under every policy, one CSV row
each, so a summary figure can be traced to the jobs behind it (which job set the makespan,
who waited, who was preempted)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from jigsaw.simulator.replay_result import ReplayResult

COLUMNS = (
    "policy",
    "job",
    "gpus",
    "submitted_h",
    "first_start_h",
    "finished_h",
    "jct_h",
    "preemptions",
    "gpu_hours",
    "state",
)
"""Times in hours from the replay's first submission (``jct_h`` from the job's own); empty
where a job never started or never finished. ``gpu_hours``: the service it attained."""


def writable_problem(path: Path) -> str | None:
    """Why ``path`` cannot be written (checked before a replay that may run for minutes)."""
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        return f"--jobs {path} is a directory; give a file name such as jobs.csv"
    if not parent.is_dir():
        return f"--jobs {path}: the folder {parent} does not exist"
    return None


def write_job_table(results: Sequence[ReplayResult], path: Path) -> int:
    """Write one row per job of each result to ``path``; returns the rows written."""
    rows = 0
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for result in results:
            origin = result.first_submit
            for job in sorted(result.store.all_jobs(), key=lambda j: (j.submitted_at, j.id)):
                finished = job.finished_at
                writer.writerow(
                    (
                        result.policy,
                        job.id,
                        job.spec.workers,
                        _hours(job.submitted_at - origin),
                        "" if job.started_at is None else _hours(job.started_at - origin),
                        "" if finished is None else _hours(finished - origin),
                        "" if finished is None else _hours(finished - job.submitted_at),
                        job.preemptions,
                        _hours(job.attained_gpu_seconds),
                        job.state.value,
                    )
                )
                rows += 1
    return rows


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.4f}"
