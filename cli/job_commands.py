"""Verbs on submitted jobs: list, status, describe, logs, cancel (submit is
:mod:`cli.submit_command`)."""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated, Any

import typer
import yaml
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.text import Text

from cli.client import JigsawClient
from cli.context import make_client
from cli.durations import iso_before, parse_duration, since_time
from cli.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, ApiError, CliError, UsageError
from cli.formatting import STATE_STYLES, TERMINAL_STATES, format_time
from cli.job_lookup import job_id_of, job_ids_of
from cli.output import (
    ListFormat,
    OutputFormat,
    OutputOption,
    emit,
    note,
    print_renderable,
    stdout,
)
from cli.views import (
    job_change_line,
    job_description,
    job_summary,
    jobs_table,
    plan_changes,
    watch_key,
)
from cli.watch import watch_jobs
from jigsaw.model.wording import counted
from jigsaw.scheduling.seams import JOB_SORT_KEYS

JobArgument = Annotated[
    str, typer.Argument(help="Job id, as printed by submit and list, or the job's name.")
]
LOG_POLL_S = 1.0
ACTIVE_STATES = [state for state in STATE_STYLES if state not in TERMINAL_STATES]


ListOutputOption = Annotated[
    ListFormat,
    typer.Option(
        "--output",
        "-o",
        help="table for people, wide adds why each job waits; json or yaml for scripts.",
    ),
]

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


SORT_KEYS = JOB_SORT_KEYS
DESCENDING_FIRST = ("submitted", "priority")
"""Keys listed highest first by default: the newest jobs, the highest priorities."""
LIST_WATCH_S = 2.0


def list_jobs(
    state: StateOption = None,
    user: Annotated[str | None, typer.Option(help="Only this user's jobs (admins).")] = None,
    queue: Annotated[str | None, typer.Option(help="Only jobs in this queue.")] = None,
    name: Annotated[
        str | None,
        typer.Option(help="Only jobs of this name (any case); * matches anything: 'train-*'."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            help="Only jobs submitted in the last DURATION (30m, 2h, 1d) or since a time "
            "(2026-11-27T01:30Z)."
        ),
    ] = None,
    sort: Annotated[
        str,
        typer.Option(
            help=f"Sort by {', '.join(SORT_KEYS)}; submitted and priority list the highest "
            "first, the others A to Z."
        ),
    ] = "submitted",
    reverse: Annotated[bool, typer.Option("--reverse", help="Reverse the order.")] = False,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many jobs.")] = 50,
    offset: Annotated[
        int, typer.Option(min=0, help="Skip this many jobs first (the next page).")
    ] = 0,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch", "-w", help="Then print a line for each change, until Ctrl-C (kubectl -w)."
        ),
    ] = False,
    output: ListOutputOption = ListFormat.table,
) -> None:
    """List jobs, newest first: optionally only those in some states, of a user, in a queue,
    of a name or submitted since a time. -o wide adds why each waiting job waits."""
    states = job_states(state)
    key = sort.strip().lower()
    if key not in SORT_KEYS:
        raise UsageError(f"--sort {sort!r} is not a sort key; choose from {', '.join(SORT_KEYS)}")
    descending = (key in DESCENDING_FIRST) != reverse
    query: dict[str, Any] = {
        "states": states,
        "user": user,
        "queue": queue,
        "name": name,
        "since": since_time(since, "--since") if since is not None else None,
        "sort": f"-{key}" if descending else key,
    }
    wide = output is ListFormat.wide
    with make_client() as client:
        page = client.list_jobs(**query, limit=limit, offset=offset)
        if output in (ListFormat.json, ListFormat.yaml):
            emit(page, OutputFormat(output.value), lambda: None)
        else:
            print_renderable(jobs_table(page.get("items", []), page.get("total"), wide=wide))
        if watch:
            _watch_list(client, query, limit, offset, page.get("items", []), output)


def _watch_list(
    client: JigsawClient,
    query: dict[str, Any],
    limit: int,
    offset: int,
    shown: list[dict[str, Any]],
    output: ListFormat,
) -> None:
    """``kubectl get -w``: after the table, one line per job whose state, reason or place in
    the queue changed (or that appeared), until Ctrl-C; with -o json or yaml, the job as a
    JSON line (JSON Lines, as ``logs -o json``)."""
    seen = {job["id"]: watch_key(job) for job in shown}
    try:
        while True:
            time.sleep(LIST_WATCH_S)
            page = client.list_jobs(**query, limit=limit, offset=offset)
            for job in reversed(page.get("items", [])):
                key = watch_key(job)
                if seen.get(job["id"]) == key:
                    continue
                seen[job["id"]] = key
                if output in (ListFormat.json, ListFormat.yaml):
                    sys.stdout.write(json.dumps(job, ensure_ascii=False) + "\n")
                    sys.stdout.flush()
                else:
                    stdout.print(job_change_line(job), highlight=False, soft_wrap=True)
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None


def status(
    job_ids: Annotated[
        list[str], typer.Argument(metavar="JOB", help="One or more job ids or names.")
    ],
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Follow until finished (Ctrl-C detaches).")
    ] = False,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Show a job's state and progress; with --watch, follow it live."""
    with make_client() as client:
        job_ids = job_ids_of(client, job_ids)
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
        job_id = job_id_of(client, job_id)
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
        job_id = job_id_of(client, job_id)
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
            targets = job_ids_of(client, list(job_ids or []))
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
