""":func:`aligned_changes` and :class:`SnapshotDiff`, the side-by-side diff of two snapshots
that the kept LAS gang round is fixed up from.

The contract: every record of the new sequence that the old one does not hold (by identity) is
reported added, every record of the old one the new one does not hold is reported removed,
nothing else is reported but records found out of step (reported both ways), and on sequences
in arrival order, as snapshots list them, the report is exactly the difference.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from jigsaw.model.domain import Job, JobSpec
from jigsaw.policies.speed.record_diff import SnapshotDiff, aligned_changes


def _job(index: int) -> Job:
    spec = JobSpec(name=f"j{index}", model="mlp", workers=1, iterations=10)
    return Job(id=f"j{index:03d}", spec=spec, submitted_at=float(index // 2))


_POOL = [_job(index) for index in range(120)]
"""Distinct jobs in arrival order (two per submit time: the id breaks the tie)."""


def _renewed(job: Job) -> Job:
    """A new record of the same job (the store makes one at every change)."""
    return replace(job, version=job.version + 1, iterations_done=job.iterations_done + 1)


@st.composite
def _two_rounds(draw: st.DrawFn) -> tuple[list[Job], list[Job]]:
    """An old sequence and a new one in arrival order: jobs come and go, some get a new
    record, the rest are the very same objects."""
    old_ids = draw(st.sets(st.integers(0, len(_POOL) - 1), max_size=100))
    new_ids = draw(st.sets(st.integers(0, len(_POOL) - 1), max_size=100))
    common = sorted(old_ids & new_ids)
    renewed = draw(st.sets(st.sampled_from(common))) if common else set()
    old = [_POOL[i] for i in sorted(old_ids)]
    new = [_renewed(_POOL[i]) if i in renewed else _POOL[i] for i in sorted(new_ids)]
    return old, new


def _identities(jobs: list[Job]) -> set[int]:
    return {id(job) for job in jobs}


@settings(max_examples=300, deadline=None)
@given(rounds=_two_rounds())
def test_in_arrival_order_the_report_is_exactly_the_difference(
    rounds: tuple[list[Job], list[Job]],
) -> None:
    old, new = rounds
    added, removed = aligned_changes(tuple(old), tuple(new))
    assert added == [job for job in new if id(job) not in _identities(old)]
    assert removed == [job for job in old if id(job) not in _identities(new)]


@settings(max_examples=300, deadline=None)
@given(rounds=_two_rounds(), data=st.data())
def test_in_any_order_nothing_new_is_missed(
    rounds: tuple[list[Job], list[Job]], data: st.DataObject
) -> None:
    old, new = rounds
    old = data.draw(st.permutations(old))
    new = data.draw(st.permutations(new))
    added, removed = aligned_changes(tuple(old), tuple(new))
    assert _identities(added) <= _identities(new)
    assert _identities(removed) <= _identities(old)
    assert {id(job) for job in new if id(job) not in _identities(old)} <= _identities(added)
    assert {id(job) for job in old if id(job) not in _identities(new)} <= _identities(removed)
    # A record both hold is reported only found out of step: then both ways.
    assert _identities(added) & _identities(old) <= _identities(removed)
    assert _identities(removed) & _identities(new) <= _identities(added)


@settings(max_examples=200, deadline=None)
@given(first=_two_rounds(), second=_two_rounds())
def test_a_snapshot_diff_reports_moves_between_sides_and_jobs_gone(
    first: tuple[list[Job], list[Job]], second: tuple[list[Job], list[Job]]
) -> None:
    """The two sides hold distinct jobs; between the two snapshots jobs move sides (with a
    new record, as a start or a stop makes), vanish, arrive, or stay as they were."""
    old_running, new_running = first
    old_waiting = [job for job in second[0] if job.id not in {job.id for job in old_running}]
    new_waiting = [job for job in second[1] if job.id not in {job.id for job in new_running}]
    diff = SnapshotDiff()
    diff.changes(tuple(old_running), tuple(old_waiting))
    changes = diff.changes(tuple(new_running), tuple(new_waiting))
    before = {job.id for job in old_running + old_waiting}
    after = {job.id for job in new_running + new_waiting}
    assert sorted(changes.gone) == sorted(before - after)
    assert _identities(changes.running_added) == {
        id(job) for job in new_running if id(job) not in _identities(old_running)
    }
    assert _identities(changes.waiting_added) == {
        id(job) for job in new_waiting if id(job) not in _identities(old_waiting)
    }
    assert _identities(changes.running_removed) == {
        id(job) for job in old_running if id(job) not in _identities(new_running)
    }
