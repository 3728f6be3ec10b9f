"""Follow jobs until they finish: a live view on a terminal, plain lines otherwise.

The live view shows, per job, a progress bar (iterations, rate, time left, loss) and each
worker's SPB stop depth (or pipeline stage, or hybrid shard), so a re-plan by the scheduler is
visible as it happens; every plan change and
state transition is also printed as a line above the live view, so the history stays on screen.
Ctrl-C detaches (exit 130) and never cancels anything.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from cli.client import JigsawClient
from cli.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK
from cli.formatting import (
    STATE_STYLES,
    TERMINAL_STATES,
    depth_bar,
    format_duration,
    format_loss,
    format_plan,
    progress_fraction,
)
from cli.output import stderr
from cli.plans import parsed_plan, plan_kind, short_plan, worker_role
from cli.views import waiting_words

SPEC_FIELDS = (
    "name",
    "model",
    "workers",
    "iterations",
    "priority",
    "spb",
    "batch_size",
    "learning_rate",
    "seed",
    "queue",
)
RATE_SMOOTHING = 0.5
"""Weight of the newest rate sample in the moving average shown as it/s."""


@dataclass
class WatchedJob:
    job_id: str
    job: dict[str, Any] = field(default_factory=dict)
    num_blocks: int | None = None
    last_iteration: int | None = None
    plan: list[int] = field(default_factory=list)
    """SPB stop depths of a data-parallel plan (empty for the other types)."""
    other_plan: str = ""
    """A pipeline or hybrid plan, as described (empty for data parallelism)."""
    events_seen: int = 0
    rate: float | None = None
    last_done: float | None = None
    last_seen_at: float | None = None

    @property
    def state(self) -> str:
        return str(self.job.get("state", "?"))

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def label(self) -> str:
        name = self.job.get("name")
        return f"{self.job_id} ({name})" if name else self.job_id

    def time_left_s(self) -> float | None:
        """Seconds until the iteration target at the rate seen so far (``None``: unknown)."""
        total = float(self.job.get("iterations") or 0)
        remaining = total - float(self.job.get("iterations_done") or 0)
        if self.finished or not self.rate or self.rate <= 0:
            return None
        return max(remaining, 0.0) / self.rate


class JobWatcher:
    """Polls the API for each job and turns changes into lines and a renderable view."""

    def __init__(self, client: JigsawClient, job_ids: list[str]) -> None:
        self.client = client
        self.jobs = [WatchedJob(job_id) for job_id in job_ids]

    def poll(self) -> list[str]:
        """Refresh every unfinished job; return the history lines (markup) to print."""
        lines: list[str] = []
        for watched in self.jobs:
            if watched.finished:
                continue
            lines.extend(self._poll_one(watched))
        return lines

    @property
    def all_finished(self) -> bool:
        return all(w.finished for w in self.jobs)

    def exit_code(self) -> int:
        return EXIT_OK if all(w.state == "SUCCEEDED" for w in self.jobs) else EXIT_FAILURE

    def _poll_one(self, watched: WatchedJob) -> list[str]:
        lines: list[str] = []
        if not watched.job:
            watched.job = self.client.get_job(watched.job_id)  # for its name in the first lines
        # Events before the job, so the job shown is never older than the last event printed.
        events = self.client.events(watched.job_id)
        for event in events[watched.events_seen :]:
            lines.append(_event_line(watched, event))
        watched.events_seen = len(events)
        job = self.client.get_job(watched.job_id)
        watched.job = job
        if isinstance(job.get("num_blocks"), int):
            watched.num_blocks = job["num_blocks"]
        now = time.monotonic()
        self._update_rate(watched, now)
        samples = self.client.progress(watched.job_id, watched.last_iteration)
        for sample in samples:
            watched.last_iteration = int(sample.get("iteration", 0))
            lines.extend(self._plan_line(watched, sample.get("plan"), watched.last_iteration))
        done = int(job.get("iterations_done") or 0)
        lines.extend(self._plan_line(watched, job.get("plan"), done))
        lines.extend(self._other_plan_line(watched, job, done))
        return lines

    def _other_plan_line(self, watched: WatchedJob, job: dict[str, Any], done: int) -> list[str]:
        """A pipeline or hybrid plan, when the job first runs one or it changes."""
        if plan_kind(job) in (None, "data"):
            return []
        plan = parsed_plan(job)
        text = plan.describe() if plan is not None else short_plan(job)
        if text == watched.other_plan:
            return []
        old, watched.other_plan = watched.other_plan, text
        if not old:
            return [f"{escape(watched.label)}: plan {escape(text)} from iteration {done}"]
        return [
            f"{escape(watched.label)}: [bold]re-planned[/] {escape(old)} → {escape(text)} "
            f"at iteration {done}"
        ]

    def _plan_line(self, watched: WatchedJob, plan: Any, iteration: int) -> list[str]:
        new_plan = [int(d) for d in plan or []]
        if not new_plan or new_plan == watched.plan:
            return []
        old = watched.plan
        watched.plan = new_plan
        if not old:
            return [
                f"{escape(watched.label)}: SPB plan {format_plan(new_plan)} "
                f"from iteration {iteration}"
            ]
        return [
            f"{escape(watched.label)}: [bold]re-planned[/] {format_plan(old)} → "
            f"{format_plan(new_plan)} at iteration {iteration}"
        ]

    def _update_rate(self, watched: WatchedJob, now: float) -> None:
        done = float(watched.job.get("iterations_done") or 0)
        if watched.last_done is not None and watched.last_seen_at is not None:
            elapsed = now - watched.last_seen_at
            if elapsed > 0 and done > watched.last_done:
                sample = (done - watched.last_done) / elapsed
                watched.rate = (
                    sample
                    if watched.rate is None
                    else RATE_SMOOTHING * sample + (1 - RATE_SMOOTHING) * watched.rate
                )
        watched.last_done, watched.last_seen_at = done, now


def _event_line(watched: WatchedJob, event: dict[str, Any]) -> str:
    source = event.get("from_state") or "(new)"
    target = str(event.get("to_state") or "?")
    style = STATE_STYLES.get(target, "white")
    reason = escape(str(event.get("reason") or ""))
    return f"{escape(watched.label)}: {source} → [{style}]{target}[/]  [dim]{reason}[/]"


def render(jobs: list[WatchedJob]) -> RenderableType:
    rows: list[RenderableType] = []
    for watched in jobs:
        job = watched.job
        state = watched.state
        done = int(job.get("iterations_done") or 0)
        total = int(job.get("iterations") or 0)
        head = Table.grid(padding=(0, 1))
        for _ in range(6):
            head.add_column(no_wrap=True)
        rate = f"{watched.rate:.1f} it/s" if watched.rate else "- it/s"
        head.add_row(
            Text(watched.label, style="bold"),
            Text(state, style=STATE_STYLES.get(state, "white")),
            ProgressBar(total=1.0, completed=progress_fraction(job), width=30),
            Text(f"{done}/{total} {progress_fraction(job) * 100:3.0f}%"),
            Text(f"{rate}  left {format_duration(watched.time_left_s())}"),
            Text(f"loss {format_loss(job.get('last_loss'))}"),
        )
        rows.append(head)
        waiting = waiting_words(job)
        if waiting is not None:
            rows.append(Text(f"  waiting: {waiting}", style="dim"))
        rows.append(_workers_line(watched))
    return Group(*rows)


def _workers_line(watched: WatchedJob) -> Text:
    if plan_kind(watched.job) not in (None, "data"):
        typed = parsed_plan(watched.job)
        text = Text("  workers: ", style="dim")
        for rank in range(int(watched.job.get("spec", {}).get("workers") or 0)):
            text.append(f"r{rank} ", style="dim")
            text.append(f"{worker_role(typed, rank, [])}  ", style="cyan")
        return text
    plan = watched.plan or [int(d) for d in watched.job.get("plan") or []]
    if not plan:
        return Text("  workers: waiting for a plan", style="dim")
    blocks = watched.num_blocks or max(plan) + 1
    text = Text("  stop depth: ", style="dim")
    for rank, depth in enumerate(plan):
        text.append(f"r{rank}=", style="dim")
        text.append(str(depth), style="bold")
        text.append(f" {depth_bar(depth, blocks)}  ", style="cyan")
    return text


def plain_line(watched: WatchedJob) -> str:
    job = watched.job
    rate = f"{watched.rate:.1f} it/s" if watched.rate else "- it/s"
    stamp = datetime.now(UTC).strftime("%H:%M:%S")
    waiting = waiting_words(job)
    if waiting is not None:
        return f"[{stamp}] {watched.label} {watched.state} {waiting}"
    return (
        f"[{stamp}] {watched.label} {watched.state} "
        f"{int(job.get('iterations_done') or 0)}/{job.get('iterations', '?')} "
        f"({progress_fraction(job) * 100:.1f}%) {rate} left "
        f"{format_duration(watched.time_left_s())} loss {format_loss(job.get('last_loss'))} "
        f"plan {short_plan(job)}"
    )


def watch_jobs(
    client: JigsawClient,
    job_ids: list[str],
    *,
    interval_s: float = 1.0,
    plain_every_s: float = 5.0,
) -> int:
    """Follow ``job_ids`` to a terminal state. 0 if all succeeded, 1 otherwise, 130 on Ctrl-C."""
    watcher = JobWatcher(client, job_ids)
    try:
        if stderr.is_terminal:
            _watch_live(watcher, interval_s)
        else:
            _watch_plain(watcher, interval_s, plain_every_s)
    except KeyboardInterrupt:
        ids = " ".join(w.job_id for w in watcher.jobs if not w.finished) or " ".join(job_ids)
        stderr.print(
            f"detached; the job keeps running. Reattach with: jigsaw-cli status {ids} --watch",
            markup=False,
        )
        return EXIT_INTERRUPTED
    for watched in watcher.jobs:
        stderr.print(_final_line(watched), highlight=False)
    return watcher.exit_code()


def _watch_live(watcher: JobWatcher, interval_s: float) -> None:
    with Live(console=stderr, refresh_per_second=4, transient=False) as live:
        while True:
            for line in watcher.poll():
                live.console.print(line, highlight=False)
            live.update(render(watcher.jobs))
            if watcher.all_finished:
                return
            time.sleep(interval_s)


def _watch_plain(watcher: JobWatcher, interval_s: float, plain_every_s: float) -> None:
    last_printed = float("-inf")
    while True:
        lines = watcher.poll()
        for line in lines:
            stderr.print(line, highlight=False)
        now = time.monotonic()
        if lines or now - last_printed >= plain_every_s or watcher.all_finished:
            for watched in watcher.jobs:
                stderr.print(plain_line(watched), markup=False, highlight=False)
            last_printed = now
        if watcher.all_finished:
            return
        time.sleep(interval_s)


def _final_line(watched: WatchedJob) -> str:
    job = watched.job
    state = watched.state
    style = STATE_STYLES.get(state, "white")
    detail = escape(str(job.get("reason") or ""))
    return (
        f"{escape(watched.label)} [{style}]{state}[/] after {int(job.get('iterations_done') or 0)} "
        f"iterations, loss {format_loss(job.get('last_loss'))}  [dim]{detail}[/]"
    )
