"""The in-memory store keeps the active jobs split by side in arrival order on every save;
the snapshot the cycle builds from those sides is the one a walk and a sort would give."""

from __future__ import annotations

import random

import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.domain import Job, JobSpec, submitted_event, transition
from jigsaw.model.lifecycle import JobState, can_transition
from jigsaw.model.snapshot import Snapshot
from jigsaw.scheduling.active_sides import split_sides
from jigsaw.scheduling.memstore import InMemoryStore

TARGETS = [
    JobState.ADMITTED,
    JobState.RUNNING,
    JobState.PREEMPTED,
    JobState.RETRYING,
    JobState.SUCCEEDED,
    JobState.CANCELLED,
]


def moved(job: Job, target: JobState, at: float, rng: random.Random) -> tuple[Job, object]:
    changes: dict[str, object] = {}
    if target is JobState.ADMITTED:
        changes = {"placement": ((0, 0),), "attempt": job.attempt + 1}
    if target is JobState.RETRYING:
        changes = {"retry_after": at + rng.choice([0.0, 5.0, 50.0])}
    return transition(job, target, reason="test", at=at, actor="test", **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(6))
def test_sides_and_snapshot_match_a_walk_and_a_sort_after_every_save(seed: int) -> None:
    rng = random.Random(seed)
    store = InMemoryStore()
    cluster = Cluster.uniform(1, 4)
    at = 0.0
    for step in range(400):
        at += 1.0
        ids = [job.id for job in store.active_jobs()]
        if not ids or rng.random() < 0.3:
            # Arrivals out of order and with ties: submitted_at is not the store's clock.
            job = Job(
                id=f"j{step:03d}-{rng.randrange(100)}",
                spec=JobSpec(name="x", model="mlp", workers=1, iterations=10),
                submitted_at=float(rng.randrange(20)),
            )
            store.add(job, submitted_event(job, "test"))
        else:
            job = store.get(rng.choice(ids))
            legal = [t for t in TARGETS if can_transition(job.state, t)]
            new, event = moved(job, rng.choice(legal), at, rng)
            store.save(new, expected_version=job.version, event=event)  # type: ignore[arg-type]
        active = store.active_jobs()
        assert active == sorted(active, key=lambda j: (j.submitted_at, j.id))
        assert store.active_count() == len(active)
        sides = store.active_sides()
        walked = split_sides(active)
        assert list(sides.holding) == list(walked.holding)
        assert list(sides.waiting) == list(walked.waiting)
        assert sides.backing_off == walked.backing_off
        for now in (at - 30.0, at, at + 30.0):
            built = Snapshot.build(now, cluster, reversed(active))
            assert (
                Snapshot.from_sides(now, cluster, sides.holding, sides.waiting, sides.backing_off)
                == built
            )
