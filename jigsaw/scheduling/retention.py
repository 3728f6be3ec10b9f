"""Checkpoint retention: a job that has finished for good never restores, so its checkpoints
are only disk. Successful gangs delete their own; this sweep covers the rest (cancelled jobs,
whether running or preempted at the time, and failed ones)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from jigsaw.model.errors import JobNotFoundError
from jigsaw.scheduling.seams import KeepsCheckpoints, Store

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SweepReport:
    discarded: list[str] = field(default_factory=list)
    """Jobs whose checkpoints were deleted."""
    busy: list[str] = field(default_factory=list)
    """Terminal jobs a stopping gang still holds: tried again at the next sweep."""
    unknown: list[str] = field(default_factory=list)
    """Directories no job in the store owns: left alone (the root may be shared)."""


def sweep_checkpoints(executor: KeepsCheckpoints, store: Store) -> SweepReport:
    """Discard the checkpoints of every job the store says is terminal."""
    report = SweepReport()
    for job_id in sorted(executor.checkpointed_jobs()):
        try:
            job = store.get(job_id)
        except JobNotFoundError:
            report.unknown.append(job_id)
            continue
        if not job.state.is_terminal:
            continue
        if executor.discard_checkpoints(job_id):
            report.discarded.append(job_id)
            log.info("deleted the checkpoints of %s (%s)", job_id, job.state.value)
        else:
            report.busy.append(job_id)
    return report
