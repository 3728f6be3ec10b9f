"""Finding the job a policy cannot decide with.

A policy that raises fails the whole round, and the next round has the same jobs, so one bad
job (a spec the oracle chokes on, a corner case in a policy) would stop all scheduling. The
cycle asks :func:`find_poison` which single job makes ``decide`` raise, fails that job with
the error as its reason, and decides again without it.

Policies change nothing when they decide (``jigsaw.scheduling.cycle``; state a policy carries
between rounds is kept by the cycle's ``end_round`` step, and
tests/core/policies/test_every_policy_is_pure.py holds every registered policy to it), so
asking them about smaller snapshots is safe: only whether they raise is used, never what
they decide.
"""

from __future__ import annotations

from dataclasses import replace

from jigsaw.model.domain import Job
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.base import Policy


def restricted(snapshot: Snapshot, keep: set[str]) -> Snapshot:
    """The snapshot with only the jobs in ``keep`` (waiting or running)."""
    return replace(
        snapshot,
        waiting=tuple(job for job in snapshot.waiting if job.id in keep),
        running=tuple(job for job in snapshot.running if job.id in keep),
    )


def without(snapshot: Snapshot, job_id: str) -> Snapshot:
    """The snapshot minus one job."""
    return replace(
        snapshot,
        waiting=tuple(job for job in snapshot.waiting if job.id != job_id),
        running=tuple(job for job in snapshot.running if job.id != job_id),
    )


def decides(policy: Policy, snapshot: Snapshot) -> bool:
    try:
        policy.decide(snapshot)
    except Exception:
        return False
    return True


def find_poison(policy: Policy, snapshot: Snapshot) -> Job | None:
    """The one job with which ``policy.decide`` raises, or ``None`` when no single job is to
    blame (it raises with no jobs at all, or only for a combination of jobs).

    Bisection: about 2·log2(jobs) + 2 calls to ``decide``."""
    suspects = [*snapshot.waiting, *snapshot.running]
    if not suspects or not decides(policy, restricted(snapshot, set())):
        return None
    while len(suspects) > 1:
        half = len(suspects) // 2
        first, second = suspects[:half], suspects[half:]
        if not decides(policy, restricted(snapshot, {job.id for job in first})):
            suspects = first
        elif not decides(policy, restricted(snapshot, {job.id for job in second})):
            suspects = second
        else:
            return None  # each half decides; only jobs together make it raise
    alone = suspects[0]
    return None if decides(policy, restricted(snapshot, {alone.id})) else alone
