"""``submit --dry-run``'s view: the resolved spec, the plan and the oracle's prediction per
worker, and the plan types compared (or, for an entrypoint the control plane does not import,
that it is not checked)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from cli.formatting import depth_bar, format_bytes, format_plan, format_spec_value
from cli.plan_types_view import plan_types_view
from cli.plans import long_plan, plan_kind
from cli.views import plain_table
from jigsaw.model.wording import counted


def validation_view(result: dict[str, Any]) -> RenderableType:
    spec = result.get("spec", {})
    prediction = result.get("prediction") or {}
    plan = result.get("plan") or []
    num_blocks = int(result.get("num_blocks") or (max(plan, default=0) + 1))
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    for key, value in spec.items():
        head.add_row(key, format_spec_value(value))
    kind = plan_kind(result) or "data"
    if kind == "data":
        blocks = (
            counted(num_blocks, "block")
            if result.get("num_blocks")
            else "blocks unknown until the workers report them"
        )
        head.add_row("plan", f"data parallel, SPB {format_plan(plan)}  ({blocks})")
    else:
        head.add_row("plan", long_plan(result))
    iteration = prediction.get("iteration_time_s")
    head.add_row(
        "iteration time",
        f"{iteration:.4f} s (predicted, {prediction.get('source', 'oracle')})"
        if isinstance(iteration, int | float)
        else "-",
    )
    workers = plain_table(
        "RANK", "DEPTH", "BACKPROP", "COMPUTE", "MEMORY (WITH WORKSPACE)", "SENT", no_wrap=True
    )
    memory = prediction.get("per_worker_memory_bytes") or []
    compute = prediction.get("per_worker_compute_s") or []
    sent = prediction.get("per_worker_bytes_sent") or []
    depths: Sequence[int | None] = plan if kind == "data" else [None] * len(memory)
    for rank, depth in enumerate(depths):
        workers.add_row(
            str(rank),
            str(depth) if depth is not None else "-",
            depth_bar(depth, num_blocks) if depth is not None else kind,
            f"{compute[rank]:.4f} s" if rank < len(compute) else "-",
            format_bytes(memory[rank]) if rank < len(memory) else "-",
            format_bytes(sent[rank]) if rank < len(sent) else "-",
        )
    model = str(spec.get("model") or "")
    verdict = Text("Dry run: the spec is valid; nothing was submitted.", style="bold green")
    if ":" in model and not result.get("num_blocks"):
        verdict = Text(
            f"Dry run: the spec's fields are valid, but the entrypoint {model} is not checked: "
            "the control plane does not import it, so its model, blocks and plan are checked "
            "by the workers when the job starts. Nothing was submitted.",
            style="bold yellow",
        )
    return Group(
        verdict,
        head,
        Text(""),
        workers,
        Text(
            "  MEMORY (WITH WORKSPACE): the whole worker, model and runtime workspace; the plan "
            "types' MODEL MEMORY is the model's part, what the per-worker limit covers",
            style="dim",
        ),
        Text(""),
        Text("Plan types", style="bold underline"),
        plan_types_view(result.get("plan_types")),
    )
