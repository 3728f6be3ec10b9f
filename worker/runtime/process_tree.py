"""The processes a process started, found through ``/proc`` (Linux; elsewhere none), so that
what outlives a clean shutdown can be stopped: Ray's dashboard and runtime-env agents survive
``ray.shutdown()`` now and then (re-parented to init once their raylet is gone, deaf to SIGTERM).

A process is named by its pid and its start time, so a pid the kernel reused is never touched.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

PROC = Path("/proc")

Process = tuple[int, int]
"""(pid, start time in clock ticks since boot)."""


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process, or None."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # a zombie has exited; only its parent's wait is left
        return None
    return int(fields[1]), int(fields[19])


def descendants(pid: int) -> list[Process]:
    """Every live process below ``pid`` (children, their children, ...)."""
    children: dict[int, list[Process]] = {}
    if not PROC.is_dir():
        return []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is not None:
            children.setdefault(stat[0], []).append((int(entry.name), stat[1]))
    found: list[Process] = []
    frontier = [pid]
    while frontier:
        for child in children.get(frontier.pop(), []):
            found.append(child)
            frontier.append(child[0])
    return found


def alive(processes: list[Process]) -> list[Process]:
    """Those of ``processes`` still running (same pid, same start time)."""
    return [(pid, started) for pid, started in processes if (_stat(pid) or (0, -1))[1] == started]


def stop(processes: list[Process], grace_s: float = 2.0) -> list[Process]:
    """SIGTERM those still running, SIGKILL what is left after ``grace_s``; returns the ones
    that had to be stopped."""
    left = alive(processes)
    for pid, _ in left:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while alive(left) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid, _ in alive(left):
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 1.0  # SIGKILL is not instant either
    while alive(left) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:  # it went meanwhile
        pass
