"""The LAS ranking kept from snapshot diffs gives, round after round, what ranking from scratch
gives: the order of :func:`las_order`, the running jobs' own order, the stability bound of
:func:`las_stable_until`, and the snapshot's own records with what a gang round reads of them.

The random world of tests/core/policies/test_las_ranking.py evolves between rounds: jobs
arrive, start, stop, finish, get cancelled and get their priority edited, and time runs on.
"""

from __future__ import annotations

import random

import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.shared.fairness import LasConfig, las_order, las_stable_until
from jigsaw.policies.speed.record_diff import SnapshotDiff
from jigsaw.policies.speed.sided_ranking import SidedLasRanking
from tests.core.policies.test_las_ranking import TIGHT, _world_steps

CLUSTER = Cluster.uniform(64, 8)


@pytest.mark.parametrize("shuffled", [False, True], ids=["arrival-order", "shuffled"])
@pytest.mark.parametrize("config", [TIGHT, LasConfig()], ids=["tight", "defaults"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kept_ranking_equals_ranking_from_scratch(
    config: LasConfig, seed: int, shuffled: bool
) -> None:
    """Shuffled sides (not as a snapshot lists them) cost more to diff, never correctness."""
    ranking, diff = SidedLasRanking(config), SnapshotDiff()
    from_scratch_keys = 0
    for now, jobs in _world_steps(seed, 400):
        snapshot = Snapshot.build(now, CLUSTER, jobs)
        running, waiting = list(snapshot.running), list(snapshot.waiting)
        if shuffled:
            rng = random.Random(int(now))
            rng.shuffle(running)
            rng.shuffle(waiting)
        ranking.update(diff.changes(tuple(running), tuple(waiting)), now)
        records = {job.id: job for job in jobs}
        held = {job.id for job in snapshot.running}
        assert [entry.id for entry in ranking.ranked] == [
            job.id for job in las_order(jobs, now, config)
        ]
        assert [entry.id for entry in ranking.held] == [
            job.id for job in las_order(snapshot.running, now, config)
        ]
        assert list(ranking.held_keys) == [entry.key for entry in ranking.held]
        for entry in ranking.ranked:
            assert entry.job is records[entry.id]
            assert (entry.workers, entry.held) == (entry.job.spec.workers, entry.id in held)
        assert ranking.soonest_change(now) == las_stable_until(jobs, now, config)
        from_scratch_keys += len(jobs)
    # Were every key recomputed each round, the equalities above would hold trivially.
    assert ranking.rekeyed < from_scratch_keys / 3


def test_a_record_that_changes_sides_alone_moves_between_the_orders() -> None:
    """A record whose key fields are as they were is swapped in, not re-keyed, yet its side
    is the snapshot's: a hand-built snapshot may put the very same record on either side."""
    config = LasConfig()
    ranking, diff = SidedLasRanking(config), SnapshotDiff()
    first, *rest = (
        Job(id=f"j{i}", submitted_at=float(i), spec=JobSpec(f"j{i}", "mlp", i, 10))
        for i in (1, 2, 3)
    )
    ranking.update(diff.changes((), (first, *rest)), 10.0)
    assert not ranking.held
    rekeyed = ranking.rekeyed
    ranking.update(diff.changes((first,), tuple(rest)), 10.0)
    assert [entry.id for entry in ranking.held] == [first.id]
    assert ranking.entry(first.id).held and ranking.rekeyed == rekeyed
    ranking.update(diff.changes((), (first, *rest)), 10.0)
    assert not ranking.held and not ranking.entry(first.id).held
