"""How ``describe`` shows a job's size: workers, per-worker and global batch, the elastic range,
the optimizer and the rule its learning rate follows as the batch changes, and every resize
with its reason (the events whose code starts ``Running/Resize``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from cli.formatting import format_time
from jigsaw.model.wording import counted

RESIZE_CODE_PREFIX = "Running/Resize"


def size_cell(job: dict[str, Any]) -> str:
    """``4 workers x 32 = global batch 128`` and, for an elastic job, its range and policy."""
    spec = job.get("spec") or {}
    if job.get("current_workers"):
        workers, batch, now = job["current_workers"], job.get("worker_batch") or 0, ""
    else:  # not running: the size it was submitted with (the last per-worker batch is not it)
        workers, batch, now = spec.get("workers") or 0, spec.get("batch_size") or 0, " (initial)"
    text = f"{counted(int(workers), 'worker')} x {batch} = global batch {workers * batch}{now}"
    low, high = spec.get("min_workers"), spec.get("max_workers")
    policy = spec.get("batch_policy") or "fixed"
    if low is None and high is None and policy == "fixed":
        return text
    low = low if low is not None else spec.get("workers")
    high = high if high is not None else spec.get("workers")
    bounds = ""
    if policy == "adaptive":
        bounds = f" {spec.get('min_global_batch')}..{spec.get('max_global_batch')}"
    return f"{text}; elastic {low}..{high} workers, batch {policy}{bounds}"


def optimizer_cell(job: dict[str, Any]) -> str:
    """``adamw, learning rate 0.001`` and, under an adaptive batch, the rule that scales it."""
    spec = job.get("spec") or {}
    optimizer = spec.get("optimizer") or "sgd"
    text = f"{optimizer}, learning rate {spec.get('learning_rate')}"
    if spec.get("batch_policy") != "adaptive":
        return text
    rule = "AdaScale" if optimizer == "sgd" else "the square-root rule"
    return f"{text} at global batch {_initial_global_batch(spec)}, scaled by {rule}"


def _initial_global_batch(spec: dict[str, Any]) -> int:
    return int(spec.get("workers") or 0) * int(spec.get("batch_size") or 0)


def resizes_table(events: Sequence[dict[str, Any]], job: dict[str, Any]) -> RenderableType:
    """Every resize with its reason, then why the job is at its size now (the server's
    ``resizing`` phrases: the policy, the hold, idle GPUs, waiting jobs, what growing would
    save against the restart)."""
    resizes = [e for e in events if str(e.get("code") or "").startswith(RESIZE_CODE_PREFIX)]
    story = [str(phrase) for phrase in job.get("resizing") or []]
    if not resizes:
        head: RenderableType = Text("  never resized" + (":" if story else ""), style="dim")
    else:
        table = Table(box=None, header_style="bold", pad_edge=False)
        for column in ("AT", "CODE", "REASON"):
            table.add_column(column)
        for event in resizes:
            table.add_row(format_time(event.get("at")), str(event["code"]), Text(event["reason"]))
        head = table
    if not story:
        return head
    # The last resize is in the table already; the rest says why the size holds now.
    now = [phrase for phrase in story if not phrase.startswith("last resize (")]
    return Group(head, *(Text(f"  {phrase}", style="dim") for phrase in now))
