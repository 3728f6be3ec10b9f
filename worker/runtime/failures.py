"""Why a gang stopped, and whether restarting it from its checkpoint may help.

When a rank dies its peers fail too (their collectives lose a partner), often before Ray
reports the death; :func:`diagnose` gives the other ranks a moment and prefers a death over
its symptoms. Bad specs, unreadable checkpoints and a model over the per-worker memory limit are the
user's to fix (no retry); anything else (a lost peer, a flaky node) may go away on a restart.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from jigsaw.model.errors import InvalidSpecError
from worker.runtime.memory_limit import WorkerMemoryExceeded
from worker.spb import CheckpointError


class GangFailure(Exception):
    """The gang cannot go on; ``retryable`` says whether a restart from checkpoint may help."""

    def __init__(self, reason: str, *, retryable: bool, detail: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.detail = detail
        """The worker's traceback, as lines for the job's log (empty when none came back)."""


class PlacementTimeout(GangFailure):
    """Ray could not reserve the gang's placement group in time (GPUs busy or a node gone):
    nothing ran, so a resize may fall back to the job's last size."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, retryable=True)


def diagnose(exc: BaseException, refs: Sequence[ray.ObjectRef[Any]]) -> GangFailure:
    """The root cause among ``exc`` and whatever the other ranks' ``refs`` raise."""
    if refs:
        ray.wait(list(refs), num_returns=len(refs), timeout=3.0)
    causes = [exc]
    for ref in refs:
        try:
            ray.get(ref, timeout=0)
        except Exception as other:
            causes.append(other)
    deaths = [c for c in causes if isinstance(c, RayActorError)]
    if deaths:
        return GangFailure(f"a worker died: {first_line(deaths[0])}", retryable=True)
    return classify(causes[0])


def classify(exc: BaseException) -> GangFailure:
    """Bad specs, unreadable checkpoints and a worker over the memory limit are the user's
    to fix (no retry); anything else (a lost peer, a flaky node) may go away on a restart from
    checkpoint."""
    if isinstance(exc, RayActorError):
        return GangFailure(f"a worker died: {first_line(exc)}", retryable=True)
    if isinstance(exc, GetTimeoutError):
        return GangFailure(f"a worker did not answer: {exc}", retryable=True)
    cause: BaseException = exc
    detail: tuple[str, ...] = ()
    if isinstance(exc, RayTaskError):
        inner = exc.cause
        cause = inner if isinstance(inner, BaseException) else exc
        detail = worker_traceback(exc)
    if isinstance(cause, InvalidSpecError | CheckpointError | WorkerMemoryExceeded):
        return GangFailure(str(cause), retryable=False, detail=detail)
    return GangFailure(
        f"training raised {type(cause).__name__}: {first_line(cause)}",
        retryable=True,
        detail=detail,
    )


TRACEBACK_LINES = 60
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def worker_traceback(error: RayTaskError) -> tuple[str, ...]:
    """The remote traceback Ray carried back: its last lines, the innermost frames and the
    error (Ray's first line names the worker: ``ray::GangWorker.setup() (pid=.., ip=..)``)."""
    # Ray raises a class that is both RayTaskError and the cause's class, whose str() is the
    # remote traceback; it may lack RayTaskError's attributes (they fall through to the cause).
    plain = ANSI_ESCAPE.sub("", str(error))
    lines = [line for line in plain.splitlines() if line.strip(" ^~")]  # no caret lines
    if not lines:
        return ()
    return ("worker traceback:", *lines[-TRACEBACK_LINES:])


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    # Ray prefixes task errors with a traceback; the last line holds the message itself.
    return lines[-1].strip()[:300]
