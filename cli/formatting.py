"""Small human-readable renderings shared by tables and the live watch view."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

STATE_STYLES = {
    "PENDING": "yellow",
    "ADMITTED": "cyan",
    "RUNNING": "bold green",
    "PREEMPTED": "magenta",
    "RETRYING": "bold yellow",
    "SUCCEEDED": "green",
    "FAILED": "bold red",
    "CANCELLED": "dim",
}
TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


def styled_state(state: str) -> str:
    return f"[{STATE_STYLES.get(state, 'white')}]{state}[/]"


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(value: str | None) -> str:
    """``2026-11-22 07:00:05Z``: UTC, as the server stores it (``Z`` says so), or ``-``."""
    parsed = parse_time(value)
    return parsed.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ") if parsed else "-"


def format_age(value: str | None, now: datetime | None = None) -> str:
    parsed = parse_time(value)
    if parsed is None:
        return "-"
    seconds = ((now or datetime.now(UTC)) - parsed).total_seconds()
    return format_duration(max(seconds, 0.0)) + " ago"


def format_duration(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds < 0:
        return "-"
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    return f"{hours // 24}d{hours % 24:02d}h"


def format_bytes(count: float | None) -> str:
    if count is None:
        return "-"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def format_plan(plan: Sequence[int] | None) -> str:
    return "-" if not plan else ",".join(str(d) for d in plan)


def format_loss(loss: float | None) -> str:
    return "-" if loss is None else f"{loss:.4f}"


def format_spec_value(value: Any) -> str:
    """A spec field as a person reads it: ``-`` for a field left unset (not ``None``)."""
    return "-" if value is None else str(value)


def format_gpu(gpu: Sequence[int]) -> str:
    node, index = gpu
    return f"{node}:{index}"


def format_placement(placement: Sequence[Sequence[int]] | None) -> str:
    return "-" if not placement else " ".join(format_gpu(g) for g in placement)


def depth_bar(depth: int, num_blocks: int) -> str:
    """Blocks a worker backpropagates through, input side first: ``··██`` is depth 2 of 4."""
    depth = min(max(depth, 0), num_blocks)
    return "·" * depth + "█" * (num_blocks - depth)


def progress_fraction(job: dict[str, object]) -> float:
    value = job.get("progress")
    if isinstance(value, int | float):
        return min(max(float(value), 0.0), 1.0)
    done, total = job.get("iterations_done"), job.get("iterations")
    if isinstance(done, int | float) and isinstance(total, int | float) and total:
        return min(max(float(done) / float(total), 0.0), 1.0)
    return 0.0
