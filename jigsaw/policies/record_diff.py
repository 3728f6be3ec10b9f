"""What changed between two rounds' job records, found by object identity.

The store hands out a new immutable ``Job`` for every change, so the records a round sees that
the last round did not are exactly the new or changed jobs; the comparison of identity sets
runs at C speed. Kept policy state (:mod:`jigsaw.policies.las_ranking`,
:mod:`jigsaw.policies.kept_ledger`) re-keys or re-books only those.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from jigsaw.domain import Job


def record_diff(
    last: Mapping[int, Job], jobs: Sequence[Job]
) -> tuple[dict[int, Job], list[Job], list[str]]:
    """``(seen, added, gone)``: this round's records by identity (the next round's ``last``),
    the records that are new since ``last``, and the ids of jobs whose last record is gone
    with no new record for them (finished, cancelled, or no longer in this view)."""
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
