"""What changed between two rounds' job records, found by object identity (part of
:mod:`jigsaw.policies.speed.round_memory`, which says why identity is enough): by job id
(:func:`record_diff`, :func:`changed_records`), or walking two snapshots' sides in step
(:func:`aligned_changes`, :class:`SnapshotDiff`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, count
from operator import attrgetter, is_, is_not, not_

from jigsaw.model.domain import Job

_JOB_ID = attrgetter("id")
_ARRIVAL = attrgetter("submitted_at", "id")
"""The order :meth:`~jigsaw.model.snapshot.Snapshot.build` lists each side of a snapshot in."""
_BLOCK = 32
"""Records compared at once by :func:`aligned_changes`: long enough that the Python loop
around a block costs little, short enough that finding a change in one costs little
(measured on full Philly's rounds: 32 beats 16 and 64)."""


def record_diff(
    last: Mapping[int, Job], jobs: Sequence[Job]
) -> tuple[Mapping[int, Job], list[Job], list[str]]:
    """``(seen, added, gone)``: this round's records by identity (the next round's ``last``),
    the records that are new since ``last``, and the ids of jobs whose last record is gone
    with no new record for them (finished, cancelled, or no longer in this view)."""
    if len(jobs) == len(last) and all(map(is_, jobs, last.values())):
        return last, [], []  # the same records in the same order: nothing changed
    seen = dict(zip(map(id, jobs), jobs, strict=True))
    if seen.keys() == last.keys():
        return seen, [], []
    added = [seen[address] for address in seen.keys() - last.keys()]
    still = {job.id for job in added}
    gone = [
        job_id
        for job_id in (last[address].id for address in last.keys() - seen.keys())
        if job_id not in still
    ]
    return seen, added, gone


def changed_records(last: Mapping[str, Job], jobs: Sequence[Job]) -> tuple[list[Job], list[str]]:
    """``(added, gone)`` as :func:`record_diff` finds them, against ``last``, the records a
    caller holds by job id (it holds them: identity stays meaningful). Every pass over
    ``jobs`` runs in C, which matters when hundreds of jobs wait and a handful change."""
    same = list(map(is_, jobs, map(last.get, map(_JOB_ID, jobs))))
    added = [] if all(same) else list(compress(jobs, map(not_, same)))
    newcomers = sum(1 for job in added if job.id not in last)
    if len(jobs) - newcomers == len(last):
        return added, []  # every job ``last`` holds is still here
    present = set(map(_JOB_ID, jobs))
    return added, [job_id for job_id in last if job_id not in present]


def aligned_changes(old: Sequence[Job], new: Sequence[Job]) -> tuple[list[Job], list[Job]]:
    """``(added, removed)``: the records of ``new`` that are not the record at the matching
    place of ``old``, and the records of ``old`` left unmatched.

    A snapshot lists each side in arrival order, which no change of a record moves, so the
    records two snapshots share stay in step between the few that changed: the two are
    walked side by side, a block at a time, and tuple equality, which tests identity first,
    passes a block of unchanged records in C. That is several times cheaper than looking
    every record up by id, and it is what every round pays on hundreds of waiting jobs. At
    a mismatch the smaller arrival key is the record that is not in the other sequence (the
    same id on both sides: a new record for the job). A copy equal to the old record in
    every field may pass for it: it says nothing the old record does not.

    The answer is right for any two sequences of distinct records, in any order: a record
    found out of step is only reported both added and removed, and a caller that treats
    ``removed`` as "maybe gone" (an id that is also added is not gone) stays exact."""
    if new is old:
        return [], []
    added: list[Job] = []
    removed: list[Job] = []
    i = j = 0
    size, old_size = len(new), len(old)
    while i < size and j < old_size:
        fresh, kept = new[i : i + _BLOCK], old[j : j + _BLOCK]
        # A block whose last records match is most likely all unchanged; one whose last
        # records differ is not compared whole, which would call Job.__eq__ on a mismatch.
        if fresh[-1] is kept[-1] and fresh == kept:
            i += len(fresh)
            j += len(fresh)
            continue
        step = next(compress(count(), map(is_not, fresh, kept)), None)
        if step is None:  # one block is the start of the other: the shorter one matched
            span = min(len(fresh), len(kept))
            i += span
            j += span
            continue
        i += step
        j += step
        record, last = new[i], old[j]
        if record.id == last.id:
            added.append(record)
            removed.append(last)
            i += 1
            j += 1
        elif _ARRIVAL(record) < _ARRIVAL(last):
            added.append(record)
            i += 1
        else:
            removed.append(last)
            j += 1
    added.extend(new[i:])
    removed.extend(old[j:])
    return added, removed


@dataclass(slots=True)
class SnapshotChanges:
    """What differs between two snapshots, side by side (:class:`SnapshotDiff`)."""

    running_added: list[Job]
    """Records on the running side that the last snapshot did not have there."""
    running_removed: list[Job]
    """Records the last snapshot had on the running side that this one does not."""
    waiting_added: list[Job]
    """Records on the waiting side that the last snapshot did not have there."""
    gone: list[str]
    """Jobs the last snapshot had, on either side, that this one has on neither."""


class SnapshotDiff:
    """The changes from the last snapshot passed in to the next (:func:`aligned_changes` on
    each side). A job that moved between the sides has a new record on its new side."""

    def __init__(self) -> None:
        self._running: Sequence[Job] = ()
        self._waiting: Sequence[Job] = ()

    def changes(self, running: Sequence[Job], waiting: Sequence[Job]) -> SnapshotChanges:
        running_added, running_removed = aligned_changes(self._running, running)
        waiting_added, waiting_removed = aligned_changes(self._waiting, waiting)
        self._running, self._waiting = running, waiting
        gone: list[str] = []
        if running_removed or waiting_removed:
            present = set(map(_JOB_ID, running_added))
            present.update(map(_JOB_ID, waiting_added))
            for job in running_removed + waiting_removed:
                if job.id not in present:
                    present.add(job.id)  # once, though both sides had it
                    gone.append(job.id)
        return SnapshotChanges(running_added, running_removed, waiting_added, gone)
