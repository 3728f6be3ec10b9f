"""Typed errors. Each carries a message written for the person who has to fix the input."""

from __future__ import annotations


class JigsawError(Exception):
    """Base class for every error JigSaw raises on purpose."""


class InvalidSpecError(JigsawError, ValueError):
    """A job spec, plan or trace row is malformed. ``field`` names what to fix."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class InvalidPlanError(InvalidSpecError):
    """An SPB plan names a depth outside the model or leaves a block untrained."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="spb")


class IllegalTransitionError(JigsawError):
    """A job was asked to move between two states the lifecycle table does not connect."""


class JobNotFoundError(JigsawError, KeyError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"no job with id {job_id!r}")
        self.job_id = job_id

    def __str__(self) -> str:
        return str(self.args[0])


class ConflictError(JigsawError):
    """An optimistic-concurrency or epoch check failed: someone else changed the row first."""


class TraceFormatError(InvalidSpecError):
    """A trace file has a malformed row. The message names the file and the line."""

    def __init__(self, path: str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line
