"""The human (``-o table``) views of jobs, the queue and tokens (the cluster and the model zoo:
cli/cluster_views.py). JSON and YAML output bypass this module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from cli.elastic_views import optimizer_cell, resizes_table, size_cell
from cli.formatting import (
    format_age,
    format_duration,
    format_gpu,
    format_loss,
    format_placement,
    format_plan,
    format_spec_value,
    format_time,
    parse_time,
    progress_fraction,
    styled_state,
)
from cli.plan_types_view import plan_types_view
from cli.plans import chosen_kind, long_plan, parsed_plan, plan_kind, short_plan, worker_role
from jigsaw.model.wording import counted


def plain_table(*columns: str, no_wrap: bool = False) -> Table:
    """The CLI's look for a table: no box, bold headers, flush left."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in columns:
        table.add_column(column, no_wrap=no_wrap)
    return table


def jobs_table(
    items: Sequence[dict[str, Any]], total: int | None = None, *, wide: bool = False
) -> RenderableType:
    """The ``list`` table; ``wide`` adds the priority and, for a waiting job, its place in
    the queue and why it waits (the queue's words)."""
    columns = ["ID", "NAME", "USER", "QUEUE", "STATE", "PROGRESS", "PLAN", "LOSS", "AGE"]
    if wide:
        columns[5:5] = ["PRIORITY", "WAITING (POS, EST. START: REASON)"]
    table = plain_table(*columns, no_wrap=True)
    for job in items:
        cells: list[RenderableType] = [
            job["id"],
            job.get("name", "-"),
            job.get("user", "-"),
            job.get("queue", "-"),
            styled_state(job["state"]),
            _progress_cell(job),
            short_plan(job),
            format_loss(job.get("last_loss")),
            format_age(job.get("created_at")),
        ]
        if wide:
            cells[5:5] = [str(job.get("priority", 0)), Text(waiting_words(job) or "-")]
        table.add_row(*cells)
    if not items:
        return Text("No jobs match.", style="dim")
    if total is not None and total > len(items):
        return Group(table, Text(f"showing {len(items)} of {total} jobs", style="dim"))
    return table


def waiting_words(job: dict[str, Any]) -> str | None:
    """Where a waiting job stands, in the queue's words: ``#2, est. start in 3m36s
    (01:23:45Z): needs 2 GPUs, 0 free, behind one (#1)``; ``None`` for a job not waiting."""
    waiting = job.get("waiting")
    if not waiting:
        return None
    reason = str(waiting.get("reason") or "")
    if waiting.get("blocked"):
        return f"#{waiting.get('position')}, never starts: {reason}"
    wait = waiting.get("estimated_wait_s")
    start = parse_time(waiting.get("estimated_start_at"))
    when = "est. start unknown"
    if isinstance(wait, int | float) and start is not None:
        when = f"est. start in {format_duration(wait)} ({start.strftime('%H:%M:%SZ')})"
    return f"#{waiting.get('position')}, {when}: {reason}"


def watch_key(job: dict[str, Any]) -> tuple[Any, ...]:
    """What ``list --watch`` prints a line for when it changes."""
    waiting = job.get("waiting") or {}
    return (job.get("state"), job.get("reason"), waiting.get("position"), waiting.get("reason"))


def job_change_line(job: dict[str, Any]) -> str:
    """One ``list --watch`` line (markup): id, name, state and why, or where it waits."""
    detail = waiting_words(job) or str(job.get("reason") or "")
    return (
        f"{job['id']}  {escape(str(job.get('name', '-')))}  {styled_state(job['state'])}  "
        f"{_progress_cell(job).strip()}  [dim]{escape(detail)}[/]"
    )


def job_summary(job: dict[str, Any], *, in_describe: bool = False) -> RenderableType:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    rows: list[tuple[str, str]] = [
        ("ID", job["id"]),
        ("Name", job.get("name", "-")),
        ("User", job.get("user", "-")),
        ("Queue", f"{job.get('queue', '-')}  (priority {job.get('priority', 0)})"),
        ("State", f"{styled_state(job['state'])}  {_reason(job)}"),
    ]
    waiting = waiting_words(job)
    if waiting is not None:
        rows.append(("Waiting", escape(waiting)))
    rows += [
        ("Progress", _progress_cell(job) + _speed(job)),
        ("Size", size_cell(job)),
        ("Optimizer", optimizer_cell(job)),
        ("Plan", long_plan(job, in_describe=in_describe)),
        ("η", _eta_cell(job)),
        ("Placement", format_placement(job.get("placement"))),
        ("Last loss", format_loss(job.get("last_loss"))),
        ("Attempt", _attempt_cell(job)),
        ("Created", format_time(job.get("created_at"))),
        ("Started", format_time(job.get("started_at"))),
        ("Finished", format_time(job.get("finished_at"))),
    ]
    for label, value in rows:
        table.add_row(label, value)
    return table


def _speed(job: dict[str, Any]) -> str:
    """``  9.8 it/s, 56s left`` for a running job that reported its rate."""
    rate = job.get("iterations_per_s")
    if not isinstance(rate, int | float) or rate <= 0:
        return ""
    return f"  {rate:.1f} it/s, {format_duration(job.get('remaining_s'))} left"


def job_description(
    job: dict[str, Any],
    events: Sequence[dict[str, Any]],
    progress: Sequence[dict[str, Any]],
) -> RenderableType:
    spec = Table.grid(padding=(0, 2))
    spec.add_column(style="bold")
    spec.add_column()
    for key, value in job.get("spec", {}).items():
        spec.add_row(key, format_spec_value(value))
    return Group(
        Text("Job", style="bold underline"),
        job_summary(job, in_describe=True),
        Text(""),
        Text("Spec", style="bold underline"),
        spec,
        Text(""),
        Text("Placement", style="bold underline"),
        placement_table(job),
        Text(""),
        Text("Plan type (oracle prediction per alternative)", style="bold underline"),
        plan_types_view(job.get("plan_types")),
        Text(""),
        Text("Statistical efficiency (η) per plan", style="bold underline"),
        eta_table(job),
        Text(""),
        Text("Plan history", style="bold underline"),
        plan_history_table(progress)
        if plan_kind(job) in (None, "data")
        else Text(f"  {long_plan(job)}, for the whole run (only SPB depths change)", style="dim"),
        Text(""),
        Text("Resizes", style="bold underline"),
        resizes_table(events, job),
        Text(""),
        Text("Events", style="bold underline"),
        events_table(events),
    )


def eta_table(job: dict[str, Any]) -> RenderableType:
    """η of every SPB plan the job may be given, with its source (``online`` once its own
    gradient noise covers every block). Only data-parallel jobs have SPB plans; a pipeline or
    hybrid job has its plan type's one η (2BW's weight delay, or 1), as the server gives it."""
    kind = chosen_kind(job)
    if kind not in (None, "data"):
        whole = typed_eta(job)
        if whole is None:
            return Text(f"  unknown for this {kind} plan until the job starts", style="dim")
        which = "this" if plan_kind(job) is not None else "the"
        return Text(
            f"  {whole['eta']:.3f} for {which} {kind} plan ({whole['source']})", style="dim"
        )
    eta = job.get("eta")
    if not eta or not eta.get("candidates"):
        return Text("  unknown until the first lease reports the model's blocks", style="dim")
    table = plain_table("PLAN", "DEPTHS", "η", "SOURCE")
    for candidate in eta["candidates"]:
        table.add_row(
            str(candidate["plan"]),
            format_plan(candidate["depths"]),
            f"{candidate['eta']:.3f}",
            str(candidate["source"]),
        )
    return table


def typed_eta(job: dict[str, Any]) -> dict[str, Any] | None:
    """The server's η of a pipeline or hybrid job's plan (no SPB depths): ``current`` once it
    runs, before that its one candidate (the plan the planner gives it); ``None`` when the
    server gives neither."""
    eta = job.get("eta") or {}
    current = eta.get("current")
    if current and not current.get("depths"):
        return dict(current)
    candidates = eta.get("candidates") or []
    if len(candidates) == 1 and not candidates[0].get("depths"):
        return dict(candidates[0])
    return None


def _eta_cell(job: dict[str, Any]) -> str:
    """η of the plan the job runs (statistical efficiency: progress per iteration against
    full backprop), with its source."""
    eta = job.get("eta")
    if chosen_kind(job) not in (None, "data"):
        whole = typed_eta(job)
        return f"{whole['eta']:.3f} ({whole['source']})" if whole else "-"
    if not eta:
        return "-"
    current = eta.get("current")
    measured = _noise_words(eta)
    if not current:
        return f"- (known once the job runs a plan; {measured})"
    return f"{current['eta']:.3f} ({current['source']}; {measured})"


def _noise_words(eta: dict[str, Any]) -> str:
    """How much gradient noise the job has measured: ``4 blocks measured, each at least 676
    times (10 needed)`` or ``fewest 3 of the 10 observations needed``."""
    blocks = int(eta.get("blocks_measured") or 0)
    fewest = int(eta.get("fewest_observations") or 0)
    needed = int(eta.get("needed_observations") or 0)
    what = counted(blocks, "block")
    if blocks == 0:
        return f"no block measured yet; each needs {needed} observations"
    if fewest >= needed:
        return f"{what} measured, each at least {fewest} times ({needed} needed)"
    return f"{what} measured, the least-measured {fewest} of the {needed} times needed"


def placement_table(job: dict[str, Any]) -> RenderableType:
    placement = job.get("placement") or []
    if not placement:
        return Text("not placed (holds no GPUs)", style="dim")
    plan = parsed_plan(job)
    depths = list(job.get("plan") or [])
    kind = plan_kind(job)
    table = plain_table("RANK", "GPU", "STOP DEPTH" if kind in (None, "data") else "ROLE")
    for rank, gpu in enumerate(placement):
        role = worker_role(plan, rank, depths)
        table.add_row(str(rank), format_gpu(gpu), role.removeprefix("depth "))
    return table


def plan_changes(progress: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The samples at which the SPB plan changed (the first sample always counts)."""
    changes: list[dict[str, Any]] = []
    previous: list[int] | None = None
    for sample in progress:
        plan = list(sample.get("plan") or [])
        if plan and plan != previous:
            changes.append(sample)
            previous = plan
    return changes


def plan_history_table(progress: Sequence[dict[str, Any]]) -> RenderableType:
    changes = plan_changes(progress)
    if not changes:
        return Text("no progress reported yet", style="dim")
    table = plain_table("FROM ITERATION", "AT", "PLAN")
    for sample in changes:
        iteration = sample.get("iteration")
        table.add_row(
            str(round(iteration)) if isinstance(iteration, int | float) else "-",
            format_time(sample.get("at")),
            format_plan(sample.get("plan")),
        )
    return table


def events_table(events: Sequence[dict[str, Any]]) -> RenderableType:
    if not events:
        return Text("no events", style="dim")
    table = plain_table("AT", "FROM", "TO", "ACTOR", "REASON")
    for event in events:
        table.add_row(
            format_time(event.get("at")),
            event.get("from_state") or "-",
            styled_state(event.get("to_state") or "-"),
            event.get("actor") or "-",
            Text(event.get("reason") or ""),
        )
    return table


def queue_table(items: Sequence[dict[str, Any]], order: str | None = None) -> RenderableType:
    """The waiting jobs; ``order``: how the server's policy orders them (a footnote)."""
    if not items:
        return Text("The queue is empty: no job is waiting.", style="dim")
    table = plain_table("POS", "JOB", "NAME", "USER", "EST. START", "EST. WAIT", "REASON")
    for item in items:
        blocked = item.get("blocked")
        table.add_row(
            str(item.get("position", "-")),
            item.get("job_id", "-"),
            item.get("name", "-"),
            item.get("user", "-"),
            format_time(item.get("estimated_start_at")) if not blocked else "never",
            format_duration(item.get("estimated_wait_s")) if not blocked else "-",
            Text(str(item.get("reason") or blocked or "")),
        )
    if order:
        return Group(table, Text(f"order: {order}; start times are estimates", style="dim"))
    return table


def token_table(items: Sequence[dict[str, Any]]) -> RenderableType:
    if not items:
        return Text("No tokens.", style="dim")
    table = plain_table("ID", "NAME", "USER", "SCOPES", "CREATED", "REVOKED", no_wrap=True)
    for item in items:
        table.add_row(
            str(item.get("id", "-")),
            item.get("name", "-"),
            item.get("user", "-"),
            ",".join(item.get("scopes") or []),
            format_time(item.get("created_at")),
            format_time(item.get("revoked_at")),
        )
    return table


def _progress_cell(job: dict[str, Any]) -> str:
    fraction = progress_fraction(job)
    done = job.get("iterations_done") or 0
    total = job.get("iterations") or job.get("spec", {}).get("iterations") or 0
    return f"{fraction * 100:5.1f}%  {int(done)}/{total}"


def _attempt_cell(job: dict[str, Any]) -> str:
    parts = [str(job.get("attempt", 0))]
    if job.get("preemptions"):
        parts.append(f"{job['preemptions']} preemption(s)")
    if job.get("failures"):
        parts.append(f"{job['failures']} failure(s)")
    if job.get("preempted_by"):
        parts.append(f"last preempted by {job['preempted_by']}")
    return ", ".join(parts)


def _reason(job: dict[str, Any]) -> str:
    reason = job.get("reason")
    return f"[dim]({reason})[/]" if reason else ""
