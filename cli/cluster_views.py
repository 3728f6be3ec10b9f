"""The cluster and the model zoo as people read them (``-o table``): nodes, GPUs with the
workers on each (their role in their plan and, when shared, their booked load), and which
plan types fit each zoo model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from cli.formatting import format_bytes, format_gpu
from cli.views import plain_table
from jigsaw.model.wording import counted

JOB_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta")


def cluster_view(cluster: dict[str, Any]) -> RenderableType:
    nodes = Table(title="Nodes", title_justify="left", box=None, header_style="bold")
    for column in ("NODE", "NAME", "GPUS", "TYPE", "GPU MEMORY", "ALIVE"):
        nodes.add_column(column, no_wrap=True)
    for node in cluster.get("nodes", []):
        nodes.add_row(
            str(node.get("index")),
            node.get("name", "-"),
            str(node.get("num_gpus", "-")),
            node.get("gpu_type", "-"),
            format_bytes(node.get("gpu_memory_bytes")),
            "yes" if node.get("alive", True) else "[bold red]NO[/]",
        )
    colors = _job_colors(cluster.get("gpus", []))
    gpus = Table(title="GPUs", title_justify="left", box=None, header_style="bold")
    workers_header = "WORKERS (job/rank role, booked load)"
    for column in ("GPU", "LOAD", "MEMORY", workers_header):
        gpus.add_column(column, no_wrap=column != workers_header)
    sliced: list[str] = []
    concurrent = cluster.get("sharing") == "concurrent"
    for gpu in cluster.get("gpus", []):
        workers = gpu.get("workers") or []
        load = float(gpu.get("load") or 0.0)
        cell = Text()
        for i, worker in enumerate(workers):
            if i:
                cell.append("  ")
            label = f"{worker.get('job_name') or worker.get('job_id')}/r{worker.get('rank')}"
            cell.append(label, style=colors.get(worker.get("job_id", ""), "white"))
            cell.append(f" {_role(worker)}", style="dim")
            if len(workers) > 1 and worker.get("predicted_load") is not None:
                cell.append(f" {float(worker['predicted_load']) * 100:.0f}%", style="dim")
        if len({w.get("job_id") for w in workers}) > 1:
            cell.append("  ◆ shared", style="bold")
        if load > 1.0:
            sliced.append(_over_booked(format_gpu(gpu["id"]), workers, load, concurrent))
        gpus.add_row(
            format_gpu(gpu["id"]),
            _load_cell(load, concurrent),
            f"{format_bytes(gpu.get('memory_used_bytes'))} / "
            f"{format_bytes(gpu.get('memory_bytes'))}",
            cell if workers else Text("idle", style="dim"),
        )
    parts: list[RenderableType] = [nodes, Text(""), gpus]
    if sliced:
        parts.append(
            Text(
                f"{'concurrent' if concurrent else 'time-sliced'}: {'; '.join(sliced)}. Workers "
                "that book more than all of a GPU's time "
                f"{'run on it at once (as under MPS)' if concurrent else 'take turns on it'}, "
                "each slower than alone; LOAD shows at most 100%, each worker's booked load is "
                "beside it",
                style="dim",
            )
        )
    return Group(*parts)


def _over_booked(gpu: str, workers: Sequence[dict[str, Any]], load: float, concurrent: bool) -> str:
    """``GPU 0:1 has 2 jobs taking turns (booked 198%)``: who shares a GPU booked over all of
    its time, how (turns, or at once under concurrent sharing), and what they book together."""
    jobs = len({worker.get("job_id") for worker in workers})
    sharers = counted(jobs, "job") if jobs > 1 else counted(len(workers), "worker")
    how = "running at once" if concurrent else "taking turns"
    return f"GPU {gpu} has {sharers} {how} (booked {load * 100:.0f}%)"


def _role(worker: dict[str, Any]) -> str:
    """``d=2`` for a data-parallel worker (its stop depth), else the role the server names
    (``stage 2/4``, ``shard 3/4``)."""
    if worker.get("depth") is not None:
        return f"d={worker['depth']}"
    return str(worker.get("role") or "not planned")


def models_table(models: dict[str, Any]) -> RenderableType:
    """The zoo: K, parameters, and per plan type whether it fits the server's per-worker
    memory limit (its model memory), with its η and where that comes from."""
    items = models.get("items") or []
    if not items:
        return Text("The server lists no models.", style="dim")
    kinds = ("data", "pipeline", "hybrid")
    table = plain_table(
        "MODEL", "K", "PARAMS", "PROFILE", *(k.upper() for k in kinds), "η (SOURCE)"
    )
    for model in items:
        fits = {kind: _fit_cell(model, kind) for kind in kinds}
        table.add_row(
            str(model.get("name")),
            str(model.get("num_blocks", "-")),
            _count(model.get("parameters")),
            str(model.get("profile", "-")),
            *(fits[kind] for kind in kinds),
            _eta_sources(model),
        )
    workers = models.get("workers")
    head = Text(
        f"Plan types for {counted(int(workers or 0), 'worker')} x batch "
        f"{models.get('batch_size')}, against the server's per-worker memory limit of "
        f"{format_bytes(models.get('memory_limit_bytes'))} ({models.get('gpu_type')}). "
        "yes/no: fits; *: what parallelism auto picks; the size: model memory per worker. "
        "η: the prior of an SPB staircase until a job measures its own (online); a "
        "pipeline's and a hybrid's, what parallelism auto ranks them by at the default "
        "learning rate."
    )
    refusals = [
        Text(f"{model.get('name')}: {model['refusal']}", style="dim")
        for model in items
        if model.get("refusal")
    ]
    notes = _eta_notes(items)
    return Group(
        head,
        Text(""),
        table,
        *([Text(""), *notes] if notes else []),
        *([Text(""), *refusals] if refusals else []),
    )


def _fit_cell(model: dict[str, Any], kind: str) -> Text:
    of_kind = [a for a in model.get("plan_types") or [] if a.get("kind") == kind]
    if not of_kind:
        return Text("none fits" if model.get("refusal") else "-", style="dim")
    best = min(of_kind, key=lambda a: (not a.get("fits"), a.get("max_worker_memory_bytes", 0)))
    chosen = any(a.get("chosen") for a in of_kind)
    text = Text("yes" if best.get("fits") else "no", style="green" if best.get("fits") else "red")
    text.append("*" if chosen else " ")
    text.append(f" {format_bytes(best.get('max_worker_memory_bytes'))}", style="dim")
    return text


def _eta_sources(model: dict[str, Any]) -> str:
    """η of a data-parallel staircase and of each other plan type, as the server ranked them,
    each with its source's short label (up to its colon; :func:`_eta_notes` gives it whole)."""
    parts: list[str] = []
    for fit in model.get("plan_types") or []:
        if fit.get("kind") == "data":
            parts.append(f"staircase {float(fit.get('eta', 0)):.3f} ({fit.get('eta_source')})")
            break
    for kind, eta, source in _typed_etas(model):
        parts.append(f"{kind} {eta:.3f} ({source.split(':')[0]})")
    return "; ".join(parts) or "-"


def _typed_etas(model: dict[str, Any]) -> list[tuple[str, float, str]]:
    """(kind, η, source) of the model's pipeline and hybrid plan types, one per distinct
    value (every pipeline of a model has the same η at one learning rate)."""
    seen: list[tuple[str, float, str]] = []
    for fit in model.get("plan_types") or []:
        if fit.get("kind") == "data":
            continue
        row = (str(fit.get("kind")), float(fit.get("eta", 0)), str(fit.get("eta_source")))
        if row not in seen:
            seen.append(row)
    return seen


def _eta_notes(items: Sequence[dict[str, Any]]) -> list[Text]:
    """Each pipeline or hybrid η source the table shortens, whole, once."""
    sources: list[str] = []
    for model in items:
        for _kind, _eta, source in _typed_etas(model):
            if ":" in source and source not in sources:
                sources.append(source)
    return [Text(source, style="dim") for source in sources]


def _count(value: Any) -> str:
    if not isinstance(value, int | float):
        return "-"
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:.1f}{unit}"
    return str(int(value))


def _job_colors(gpus: Sequence[dict[str, Any]]) -> dict[str, str]:
    colors: dict[str, str] = {}
    for gpu in gpus:
        for worker in gpu.get("workers") or []:
            job_id = worker.get("job_id", "")
            if job_id not in colors:
                colors[job_id] = JOB_COLORS[len(colors) % len(JOB_COLORS)]
    return colors


def _load_cell(load: float, concurrent: bool = False, width: int = 10) -> Text:
    """The GPU's booked load as a bar, capped at 100%: a GPU cannot run more than all the
    time; one booked over it is marked ``sliced`` (``at once`` under concurrent sharing; the
    view's footnote gives the booking)."""
    shown = min(load, 1.0)
    filled = min(round(shown * width), width)
    style = "green" if load <= 0.8 else "yellow" if load <= 1.0 else "red"
    text = Text("█" * filled, style=style)
    text.append("░" * (width - filled), style="dim")
    text.append(f" {shown * 100:4.0f}%")
    if load > 1.0:
        text.append(" at once" if concurrent else " sliced", style="bold")
    return text
