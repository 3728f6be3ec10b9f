"""The oracle's plan-type choice as a table: every alternative (data, pipeline, hybrid) with
its predicted iteration time, samples/s, per-worker model memory (what the per-worker limit
covers: parameters, gradients, optimizer state, activations) and bytes sent, whether it fits
that limit, and which one the job runs (``submit --dry-run``, ``describe``)."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from cli.formatting import format_bytes


def plan_types_view(plan_types: dict[str, Any] | None) -> RenderableType:
    if not plan_types:
        return Text("  data parallel: no model profile to predict other plan types", style="dim")
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in (
        "",
        "TYPE",
        "PLAN",
        "ITERATION",
        "SAMPLES/S",
        "MODEL MEMORY",
        "SENT/WORKER",
        "FITS",
    ):
        table.add_column(column, no_wrap=column != "PLAN")
    for alternative in plan_types.get("alternatives", []):
        table.add_row(
            "*" if alternative.get("chosen") else "",
            str(alternative.get("kind")),
            str(alternative.get("describe")),
            f"{alternative.get('iteration_time_s', 0.0):.4f} s",
            f"{alternative.get('samples_per_s', 0.0):.1f}",
            format_bytes(alternative.get("max_worker_memory_bytes")),
            format_bytes(alternative.get("max_worker_bytes_sent")),
            "yes" if alternative.get("fits") else "[bold red]no[/]",
        )
    limit = format_bytes(plan_types.get("memory_limit_bytes"))
    return Group(
        Text(
            f"  parallelism {plan_types.get('parallelism')}: runs "
            f"{plan_types.get('chosen')} ({plan_types.get('reason')}); per-worker memory "
            f"limit {limit}"
        ),
        table,
    )
