"""Verbs on jobs: submit, list, status, describe, logs, cancel."""

from __future__ import annotations

import json
import sys
import time
import uuid
from typing import Annotated, Any

import typer
import yaml
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.text import Text

from cli.api_words import spec_in_user_words
from cli.client import JigsawClient
from cli.context import make_client
from cli.durations import iso_before, parse_duration
from cli.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, ApiError, CliError, UsageError
from cli.formatting import STATE_STYLES, TERMINAL_STATES, format_time
from cli.jobfile import load_job_file, resolve_spec
from cli.output import OutputFormat, emit, note, stdout
from cli.plans import chosen_kind
from cli.views import (
    job_description,
    job_summary,
    jobs_table,
    plan_changes,
    validation_view,
)
from cli.watch import watch_jobs
from jigsaw.wording import counted

OutputOption = Annotated[
    OutputFormat,
    typer.Option("--output", "-o", help="table for people; json or yaml for scripts."),
]
JobArgument = Annotated[str, typer.Argument(help="Job id, as printed by submit and list.")]
LOG_POLL_S = 1.0
ACTIVE_STATES = [state for state in STATE_STYLES if state not in TERMINAL_STATES]


def submit(
    name: Annotated[str | None, typer.Option(help="Job name.")] = None,
    model: Annotated[str | None, typer.Option(help="Zoo model or package.module:fn.")] = None,
    workers: Annotated[int | None, typer.Option(help="Data-parallel workers.")] = None,
    iterations: Annotated[int | None, typer.Option(help="Training iterations.")] = None,
    priority: Annotated[int | None, typer.Option(help="-1000..1000, higher first.")] = None,
    spb: Annotated[
        str | None,
        typer.Option(help="SPB plan: auto, none, staircase, uniform:k or depths like 0,1,1,2."),
    ] = None,
    parallelism: Annotated[
        str | None,
        typer.Option(
            help="Plan type: auto (the oracle picks what fits the per-worker memory; default "
            "for zoo models), data (default for entrypoints), pipeline or hybrid."
        ),
    ] = None,
    batch_size: Annotated[int | None, typer.Option(help="Per-worker batch size.")] = None,
    min_workers: Annotated[
        int | None, typer.Option(help="Elastic: fewest workers (--workers is the initial size).")
    ] = None,
    max_workers: Annotated[int | None, typer.Option(help="Elastic: most workers.")] = None,
    batch_policy: Annotated[
        str | None,
        typer.Option(
            help="Elastic: fixed (global batch kept at every size) or adaptive (a policy "
            "chooses it within --min-global-batch..--max-global-batch)."
        ),
    ] = None,
    min_global_batch: Annotated[
        int | None, typer.Option(help="Adaptive batch: smallest global batch.")
    ] = None,
    max_global_batch: Annotated[
        int | None, typer.Option(help="Adaptive batch: largest global batch.")
    ] = None,
    optimizer: Annotated[
        str | None,
        typer.Option(
            help="sgd (default; momentum 0.9) or adamw (data parallel only). Under an "
            "adaptive batch the learning rate follows AdaScale for sgd, the square-root rule "
            "for adamw."
        ),
    ] = None,
    learning_rate: Annotated[float | None, typer.Option(help="Learning rate.")] = None,
    seed: Annotated[int | None, typer.Option(help="Random seed.")] = None,
    queue: Annotated[str | None, typer.Option(help="Queue name.")] = None,
    file: Annotated[
        str | None,
        typer.Option("--file", "-f", help="YAML/JSON job spec ('-' for stdin); flags override it."),
    ] = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Follow it to the end.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Validate and predict; submit nothing.")
    ] = False,
    idempotency_key: Annotated[
        str | None,
        typer.Option(help="Resubmitting with the same key returns the same job. Default: random."),
    ] = None,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Submit a training job (or validate it with --dry-run)."""
    flags = {
        "name": name,
        "model": model,
        "workers": workers,
        "iterations": iterations,
        "priority": priority,
        "spb": spb,
        "parallelism": parallelism,
        "batch_size": batch_size,
        "min_workers": min_workers,
        "max_workers": max_workers,
        "batch_policy": batch_policy,
        "min_global_batch": min_global_batch,
        "max_global_batch": max_global_batch,
        "optimizer": optimizer,
        "learning_rate": learning_rate,
        "seed": seed,
        "queue": queue,
    }
    job_file = load_job_file(file) if file else None
    spec = resolve_spec(job_file.values if job_file else {}, flags)
    given = {key for key, value in flags.items() if value is not None}
    where = {key: job_file.where(key) for key in job_file.values} if job_file else {}
    with make_client() as client:
        try:
            if dry_run:
                result = client.validate(spec)
            else:
                job = submit_keyed(client, spec, idempotency_key or str(uuid.uuid4()))
        except ApiError as error:
            said = spec_in_user_words(error.detail, error.body.get("field"), given, where)
            if said == error.detail:
                raise
            raise ApiError(error.status_code, said, error.body, rephrased=True) from error
        if dry_run:
            emit(result, output, lambda: validation_view(result))
            return
        emit(job, output, lambda: _submitted_line(job))
        if watch:
            raise typer.Exit(watch_jobs(client, [job["id"]]))


KEY_IN_FLIGHT_WAIT_S = 75.0
"""The server takes over a key whose request died after 60 s (api/idempotency.py)."""
KEY_IN_FLIGHT_POLL_S = 5.0


def submit_keyed(
    client: JigsawClient,
    spec: dict[str, Any],
    key: str,
    *,
    wait_s: float = KEY_IN_FLIGHT_WAIT_S,
    poll_s: float = KEY_IN_FLIGHT_POLL_S,
) -> dict[str, Any]:
    """Submit under ``key``; while the server answers 409 (the key is in flight), say what
    we wait for and retry, up to ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return client.submit(spec, key)
        except ApiError as error:
            if error.status_code != 409 or time.monotonic() + poll_s > deadline:
                raise
        note(
            f"Idempotency-Key {key!r} is still in flight on the server: another request with it "
            "is running, or a server died before storing its job (its claim lapses after 60 s); "
            f"retrying in {poll_s:g} s"
        )
        time.sleep(poll_s)


StateOption = Annotated[
    list[str] | None,
    typer.Option("--state", "-s", help="Only jobs in this state; repeat for several."),
]


def job_states(values: list[str] | None) -> list[str]:
    """``--state`` values as the API spells them; a word that is no state is a usage error
    naming the flag and every state (before anything is sent)."""
    states = [value.upper() for value in values or []]
    for state in states:
        if state not in STATE_STYLES:
            raise UsageError(
                f"--state {state!r} is not a job state; choose from {', '.join(STATE_STYLES)}"
            )
    return states


def list_jobs(
    state: StateOption = None,
    user: Annotated[str | None, typer.Option(help="Only this user's jobs (admins).")] = None,
    queue: Annotated[str | None, typer.Option(help="Only jobs in this queue.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many jobs.")] = 50,
    output: OutputOption = OutputFormat.table,
) -> None:
    """List jobs, optionally only those in some states, of a user or in a queue."""
    states = job_states(state)
    with make_client() as client:
        page = client.list_jobs(states=states, user=user, queue=queue, limit=limit)
    emit(page, output, lambda: jobs_table(page.get("items", []), page.get("total")))


def status(
    job_ids: Annotated[list[str], typer.Argument(metavar="JOB", help="One or more job ids.")],
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Follow until finished (Ctrl-C detaches).")
    ] = False,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Show a job's state and progress; with --watch, follow it live."""
    with make_client() as client:
        code = EXIT_OK
        if watch:
            code = watch_jobs(client, job_ids)
            if code == EXIT_INTERRUPTED:
                raise typer.Exit(code)
        jobs = [client.get_job(job_id) for job_id in job_ids]
    data: Any = jobs[0] if len(jobs) == 1 else {"items": jobs}
    if not watch or output is not OutputFormat.table:
        emit(data, output, lambda: _summaries(jobs))
    raise typer.Exit(code)


def describe(job_id: JobArgument, output: OutputOption = OutputFormat.table) -> None:
    """Everything about a job: spec, placement, SPB plan history and events."""
    with make_client() as client:
        job = client.get_job(job_id)
        events = client.events(job_id)
        progress = client.progress(job_id)
    data = {"job": job, "events": events, "plan_history": plan_changes(progress)}
    emit(data, output, lambda: job_description(job, events, progress))


def logs(
    job_id: JobArgument,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing until the job finishes.")
    ] = False,
    tail: Annotated[
        int | None, typer.Option(min=1, max=5000, help="Only the last N lines.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Only lines of the last DURATION: 30s, 10m, 2h, 1d, 1h30m."),
    ] = None,
    output: Annotated[
        OutputFormat,
        typer.Option("--output", "-o", help="table for people; json or yaml: one object per line."),
    ] = OutputFormat.table,
) -> None:
    """Print a job's log: state changes, progress samples and worker log lines."""
    since_at = iso_before(parse_duration(since, "--since")) if since is not None else None
    after: int | None = None
    with make_client() as client:
        try:
            page = client.logs(job_id, tail=tail, since=since_at)
            while True:
                for item in page.get("items", []):
                    _print_log_line(item, output)
                after = page.get("next", after)
                if not follow:
                    return
                if not page.get("items") and client.get_job(job_id)["state"] in TERMINAL_STATES:
                    return
                time.sleep(LOG_POLL_S)
                page = client.logs(job_id, after)
        except KeyboardInterrupt:
            raise typer.Exit(EXIT_INTERRUPTED) from None


def _print_log_line(item: dict[str, Any], output: OutputFormat) -> None:
    """One line as it arrives (a log is a stream, so ``-o json`` is JSON Lines)."""
    if output is OutputFormat.table:
        stdout.print(
            f"[dim]{format_time(item.get('at'))}[/]  {escape(str(item.get('line')))}",
            soft_wrap=True,
        )
        return
    if output is OutputFormat.json:
        sys.stdout.write(json.dumps(item, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(yaml.safe_dump([item], sort_keys=False, allow_unicode=True))
    sys.stdout.flush()


def cancel(
    job_ids: Annotated[
        list[str] | None, typer.Argument(metavar="[JOB]...", help="Jobs to cancel.")
    ] = None,
    state: Annotated[
        list[str] | None,
        typer.Option(
            "--state", "-s", help="Cancel every job of yours in this state; repeat for several."
        ),
    ] = None,
    all_jobs: Annotated[
        bool, typer.Option("--all", help="Cancel every unfinished job of yours.")
    ] = False,
    user: Annotated[
        str | None, typer.Option(help="With --state or --all: this user's jobs (admins).")
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask before cancelling by --state/--all.")
    ] = False,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Cancel jobs by id, or every job of yours in some states (--state) or unfinished
    (--all), after saying how many. A job that already finished is reported and left alone."""
    by_filter = all_jobs or bool(state)
    if by_filter == bool(job_ids):
        raise UsageError(
            "name the jobs to cancel, or use --state or --all (not both); "
            "see jigsaw-cli cancel --help"
        )
    if user is not None and not by_filter:
        raise UsageError("--user goes with --state or --all")
    cancelled: list[dict[str, Any]] = []
    failure: CliError | None = None
    with make_client() as client:
        if by_filter:
            states = job_states(state) or ACTIVE_STATES
            finished = [s for s in states if s in TERMINAL_STATES]
            if finished:
                raise UsageError(
                    f"--state {finished[0]}: a finished job cannot be cancelled; choose from "
                    f"{', '.join(ACTIVE_STATES)}"
                )
            targets = [job["id"] for job in client.all_jobs(states=states, user=user)]
            if not _confirmed(len(targets), states, user, yes):
                raise typer.Exit(EXIT_USAGE)
        else:
            targets = list(job_ids or [])
        for job_id in targets:
            try:
                cancelled.append(client.cancel(job_id))
            except ApiError as error:
                if len(targets) == 1 and not by_filter:
                    raise
                note(f"{job_id}: {error}")
                failure = error
    data: Any = cancelled[0] if len(targets) == 1 and not by_filter else {"items": cancelled}
    emit(data, output, lambda: _cancelled_lines(cancelled) or None)
    if by_filter and targets:
        note(f"cancelled {counted(len(cancelled), 'job')} of {len(targets)}")
    if failure is not None:
        raise typer.Exit(failure.exit_code)


def _confirmed(count: int, states: list[str], user: str | None, yes: bool) -> bool:
    """Say how many jobs --state/--all will cancel; ask, unless --yes or there are none."""
    whose = f"of user {user!r}" if user else "of yours"
    what = f"{counted(count, 'job')} {whose} in {', '.join(states)}"
    if count == 0:
        note(f"nothing to cancel: no job {whose} is in {', '.join(states)}")
        return True
    if yes:
        note(f"cancelling {what}")
        return True
    if not sys.stdin.isatty():
        raise UsageError(f"this would cancel {what}; add --yes to confirm (stdin is no terminal)")
    return typer.confirm(f"Cancel {what}?", default=False, err=True)


def _submitted_line(job: dict[str, Any]) -> str:
    spec = job.get("spec", {})
    return (
        f"[bold]{job['id']}[/] submitted: {escape(str(job.get('name')))}, "
        f"{counted(int(spec.get('workers') or 0), 'worker')}, "
        f"{counted(int(spec.get('iterations') or 0), 'iteration')}, "
        f"{escape(_plan_request(job))} ({job['state']})"
    )


def _plan_request(job: dict[str, Any]) -> str:
    """What the job asked for and, where the oracle chose it, the plan type it will run:
    ``spb staircase``, ``parallelism auto: pipeline``."""
    spec = job.get("spec", {})
    kind = chosen_kind(job)
    if kind in (None, "data"):
        return f"spb {spec.get('spb')}"
    asked = spec.get("parallelism") or "auto"
    return f"parallelism {asked}" if asked == kind else f"parallelism {asked}: {kind}"


def _summaries(jobs: list[dict[str, Any]]) -> RenderableType:
    parts: list[RenderableType] = []
    for job in jobs:
        if parts:
            parts.append(Text(""))
        parts.append(job_summary(job))
    return Group(*parts)


def _cancelled_lines(jobs: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"{job['id']} {job['state']}  [dim]{escape(str(job.get('reason') or ''))}[/]"
        for job in jobs
    )
