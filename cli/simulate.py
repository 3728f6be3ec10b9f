"""`jigsaw-cli simulate`: replay a workload trace under one or several policies.

Registered by cli/main.py as ``app.command("simulate")(simulate)``. Runs the real scheduling
cycle in virtual time (jigsaw/simulator); prints a table or one JSON object; ``--plot``
draws the JCT CDF and GPU utilization over time (matplotlib, imported only then).
"""

from __future__ import annotations

import json
import math
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
import yaml
from rich.console import Console, Group
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from cli.job_table import writable_problem, write_job_table
from cli.output import note, print_renderable
from jigsaw.model.errors import JigsawError
from jigsaw.oracle import SharingSettings
from jigsaw.policies import policy_names
from jigsaw.simulator.replay_result import ReplayResult
from jigsaw.simulator.run import ETA_SOURCES, KNOWLEDGE
from jigsaw.simulator.semantics import Semantics, semantics_for, trace_format
from jigsaw.simulator.trace_replay import (
    PreparedTrace,
    check_policy_options,
    prepare_trace,
    simulation_setup,
)

PROGRESS_MIN_JOBS = 2_000
"""Show a progress bar on stderr for replays at least this long."""

TABLE_COLUMNS = (
    ("policy", "policy", "{}"),
    ("jobs", "jobs", "{}"),
    ("completed", "done", "{}"),
    ("avg_jct_s", "avg JCT (h)", "hours"),
    ("p50_jct_s", "p50 JCT (h)", "hours"),
    ("p99_jct_s", "p99 JCT (h)", "hours"),
    ("makespan_s", "makespan (h)", "hours"),
    ("utilization", "util", "{:.3f}"),
    ("cluster_efficiency", "cluster eff", "{:.3f}"),
    ("preemptions", "preempt", "{}"),
    ("wall_s", "wall (s)", "{:.1f}"),
)


def simulate(
    trace: Annotated[Path, typer.Argument(help="Philly/Pollux CSV, Gavel .trace, or job list.")],
    policy: Annotated[
        str, typer.Option(help="Policy, or several comma-separated to compare side by side.")
    ] = "jigsaw",
    gpus: Annotated[int, typer.Option(help="GPUs in the simulated cluster.")] = 64,
    gpus_per_node: Annotated[int, typer.Option(help="GPUs per node.")] = 8,
    seed: Annotated[int, typer.Option(help="Seed of the Philly model mix.")] = 0,
    limit: Annotated[int | None, typer.Option(help="Replay only the first N jobs.")] = None,
    start: Annotated[
        str | None, typer.Option(help="Philly window start date, e.g. 2017-10-15.")
    ] = None,
    end: Annotated[str | None, typer.Option(help="Philly window end date (exclusive).")] = None,
    round_seconds: Annotated[
        float | None,
        typer.Option(
            help="Scheduling round length (default: 360 s for Gavel traces with "
            "--throughputs, 60 s otherwise)."
        ),
    ] = None,
    throughputs: Annotated[
        Path | None, typer.Option(help="Gavel simulation_throughputs.json (Gavel traces).")
    ] = None,
    worker_type: Annotated[
        str | None, typer.Option(help="Gavel worker type: v100, p100 or k80.")
    ] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="table, json or yaml.")] = "table",
    plot: Annotated[
        Path | None, typer.Option(help="Write the JCT CDF and utilization to this PNG.")
    ] = None,
    jobs: Annotated[
        Path | None,
        typer.Option(
            help="Write every job's outcome (start, finish, JCT, preemptions) to this CSV."
        ),
    ] = None,
    eta: Annotated[
        str,
        typer.Option(
            help="Statistical efficiency of SPB plans: table (the oracle's), curve (Pollux's "
            "validation curves over training) or one (eta = 1, an ablation)."
        ),
    ] = "table",
    knowledge: Annotated[
        str,
        typer.Option(
            help="What policies know of each job: reports (what it has measured, where the "
            "trace has measurements; the same for every policy) or oracle (nothing measured, "
            "for any policy: an ablation)."
        ),
    ] = "reports",
    policy_options: Annotated[
        str | None,
        typer.Option(
            "--policy-options",
            help='Options per policy as JSON, e.g. \'{"jigsaw": {"spb": false}}\' or '
            '\'{"timeslice": {"config": {"pack_gain": 0.25}}}\'.',
        ),
    ] = None,
    sharing: Annotated[
        str,
        typer.Option(help="How the hardware shares a GPU: timeslice (turns) or concurrent (MPS)."),
    ] = "timeslice",
    interference: Annotated[
        float, typer.Option(help="Share of every shared rate lost, 0 to 0.9 (sensitivity).")
    ] = 0.0,
) -> None:
    """Replay a trace in virtual time and report JCT, utilization and cluster efficiency."""
    policies = [name.strip() for name in policy.split(",") if name.strip()]
    problem = _check_arguments(policies, output, gpus, gpus_per_node, round_seconds, limit)
    if problem is None and eta not in ETA_SOURCES:
        problem = f"--eta must be one of {', '.join(ETA_SOURCES)}, got {eta!r}"
    if problem is None and knowledge not in KNOWLEDGE:
        problem = f"--knowledge must be one of {', '.join(KNOWLEDGE)}, got {knowledge!r}"
    problem = problem or _date_problem("--start", start) or _date_problem("--end", end)
    if problem is None and jobs is not None:
        problem = writable_problem(jobs)
    options = _parse_policy_options(policy_options) if problem is None else {}
    if problem:
        _fail(problem)
    if trace_format(trace) == "gavel" and throughputs is None:
        note(
            "a Gavel trace without --throughputs: jobs run at the oracle's predicted rates "
            "under jigsaw's semantics; give --throughputs simulation_throughputs.json for "
            "Gavel's measured rates and rounds"
        )
    try:
        setup = simulation_setup(
            trace,
            round_s=round_seconds,
            throughputs=throughputs,
            gpus=gpus,
            gpus_per_node=gpus_per_node,
            seed=seed,
            worker_type=worker_type,
            eta=eta,
            knowledge=knowledge,
            policy_options=options,
            sharing=SharingSettings(sharing, interference),
        )
        semantics = semantics_for(trace, throughputs=throughputs is not None)
        check_policy_options(policies, options, semantics)
        prepared = prepare_trace(trace, setup, limit=limit, start=start, end=end)
        results = [_run(prepared, name) for name in policies]
    except (JigsawError, OSError, ValueError) as error:
        _fail(str(error).replace("policy options", "--policy-options"))
    summaries = [result.summary for result in results]
    if output in ("json", "yaml"):
        payload: dict[str, Any] = (
            summaries[0] if len(summaries) == 1 else {"trace": str(trace), "results": summaries}
        )
        if output == "json":
            typer.echo(json.dumps(_finite(payload), sort_keys=True))
        else:
            typer.echo(yaml.safe_dump(_finite(payload), sort_keys=True), nl=False)
    else:
        _print_table(summaries, semantics)
    if jobs is not None:
        try:
            rows = write_job_table(results, jobs)
        except OSError as error:
            _fail(f"cannot write {jobs}: {error}")
        note(f"wrote {rows} jobs to {jobs}")
    if plot is not None:
        from cli.plot import plot_results

        try:
            plot_results(results, plot)
        except OSError as error:
            _fail(f"cannot write {plot}: {error}")
        note(f"wrote {plot}")


def _parse_policy_options(raw: str | None) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        options: object = json.loads(raw)
    except json.JSONDecodeError as error:
        _fail(f"--policy-options is not JSON: {error.msg} (at character {error.pos})")
    if not isinstance(options, dict):
        _fail('--policy-options must be a JSON object by policy, e.g. {"jigsaw": {"spb": false}}')
    return options


def _check_arguments(
    policies: list[str],
    output: str,
    gpus: int,
    per_node: int,
    round_s: float | None,
    limit: int | None,
) -> str | None:
    known = policy_names()
    unknown = [name for name in policies if name not in known]
    if not policies:
        return f"--policy names no policy; choose from {', '.join(known)}"
    if unknown:
        return f"unknown policy {unknown[0]!r}; choose from {', '.join(known)}"
    if output not in ("table", "json", "yaml"):
        return f"--output must be table, json or yaml, got {output!r}"
    if gpus < 1 or per_node < 1:
        return "--gpus and --gpus-per-node must be at least 1"
    if round_s is not None and not round_s > 0:
        return "--round-seconds must be positive"
    if limit is not None and limit < 1:
        return "--limit must be at least 1"
    return None


def _date_problem(flag: str, value: str | None) -> str | None:
    """A Philly window bound that is no date, named by its flag (None: it is one)."""
    if value is None:
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return f"{flag} {value!r} is not a date such as 2017-10-02"
    return None


def _run(prepared: PreparedTrace, name: str) -> ReplayResult:
    arrivals = prepared.arrivals
    if len(arrivals) < PROGRESS_MIN_JOBS or not sys.stderr.isatty():
        return prepared.replay(name)
    columns = (
        TextColumn(name),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} jobs"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(name, total=len(arrivals))

        def advance(done: int, _total: int, _now: float) -> None:
            bar.update(task, completed=done)

        return prepared.replay(name, progress=advance)


def _print_table(summaries: list[dict[str, Any]], semantics: Semantics) -> None:
    """The comparison table; written to a pipe or file, every column stays whole."""
    table = Table(title=f"{summaries[0]['jobs']} jobs on {summaries[0]['gpus']} GPUs")
    for _, header, _ in TABLE_COLUMNS:
        table.add_column(header, justify="left" if header == "policy" else "right", no_wrap=True)
    for summary in summaries:
        table.add_row(*(_cell(summary[key], fmt) for key, _, fmt in TABLE_COLUMNS))
    notes = [Text(f"semantics: {semantics.summary}")]
    if semantics.name != "pollux":
        notes.append(Text(f"η (statistical efficiency): {summaries[0]['eta_source']}"))
    print_renderable(Group(table, *notes))


def _cell(value: Any, fmt: str) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "-"
    if fmt == "hours":
        return f"{value / 3600:.2f}"
    return fmt.format(value)


def _finite(data: dict[str, Any]) -> dict[str, Any]:
    """JSON has no NaN: undefined figures (no job finished) become null."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    cleaned: dict[str, Any] = clean(data)
    return cleaned


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)
