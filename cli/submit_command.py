"""The submit verb: a job from flags and/or a job file, sent under an Idempotency-Key (or
validated and predicted with --dry-run), optionally followed to the end."""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any

import typer
from rich.markup import escape

from cli.api_words import spec_in_user_words
from cli.client import JigsawClient
from cli.context import make_client
from cli.errors import ApiError
from cli.jobfile import load_job_file, resolve_spec
from cli.output import OutputFormat, OutputOption, emit, note
from cli.plans import chosen_kind
from cli.validation_view import validation_view
from cli.views import typed_eta
from cli.watch import watch_jobs
from jigsaw.model.wording import counted


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
    spec = resolve_spec(job_file.values if job_file else {}, flags, file)
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
        warning = low_eta_warning(job)
        if warning is not None:
            note(warning)
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


LOW_ETA = 0.5
"""Below this η a pipeline's samples make less than half the progress of full data parallel's:
worth a warning at submit (2BW's weight delay at a high learning rate)."""


def low_eta_warning(job: dict[str, Any]) -> str | None:
    """A warning when the job's plan type makes little progress per sample (``None``: no)."""
    whole = typed_eta(job)
    if whole is None or whole["eta"] >= LOW_ETA:
        return None
    kind = chosen_kind(job)
    why = str(whole.get("source") or "").split(":")[0]
    return (
        f"warning: this {kind} plan's η is {whole['eta']:.2f} ({why}): each sample makes "
        f"{whole['eta']:.0%} of full backprop's progress; a lower --learning-rate, or "
        "--parallelism hybrid or data if they fit, may finish sooner"
    )


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
