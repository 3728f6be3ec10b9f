"""A job the policy cannot decide with fails alone; the rest of the queue keeps moving."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jigsaw.model.decisions import Decision
from jigsaw.model.lifecycle import JobState
from jigsaw.model.snapshot import Snapshot
from jigsaw.planning.planner import Planner
from jigsaw.policies import create_policy
from jigsaw.policies.base import PolicyBase
from jigsaw.scheduling.cycle import MAX_POISON_PER_ROUND
from tests.core.support import run_until_idle, setup, submit


class RaisesWhen(PolicyBase):
    """The real fifo policy, except that it raises when ``trigger(ids in the snapshot)``:
    a stand-in for a bug in a policy or the oracle that only some jobs reach."""

    name = "fifo"

    def __init__(self, trigger: Callable[[set[str]], bool]) -> None:
        self._fifo = create_policy("fifo", planner=Planner())
        self._trigger = trigger
        self.calls = 0

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        self.calls += 1
        ids = {job.id for job in (*snapshot.waiting, *snapshot.running)}
        if self._trigger(ids):
            raise ValueError("no profile for block 7")
        return self._fifo.decide(snapshot)


def test_a_waiting_poison_job_fails_and_the_others_start_in_the_same_round() -> None:
    store, clock, executor, cycle = setup(num_gpus=4)
    cycle.policy = RaisesWhen(lambda ids: "bad" in ids)
    for index, name in enumerate(["a", "bad", "b", "c"]):
        submit(store, name, workers=1, iterations=20, at=float(index))
    report = cycle.run_once()

    bad = store.get("bad")
    assert bad.state == JobState.FAILED
    assert bad.reason == (
        "the fifo policy raises whenever it decides with this job (ValueError: no profile "
        "for block 7); failed so the rest of the queue keeps moving"
    )
    assert {store.get(name).state for name in "abc"} == {JobState.ADMITTED}
    assert report.applied == 3 and "bad" not in {j.id for j in report.snapshot.waiting}
    run_until_idle(clock, executor, cycle)
    assert {store.get(name).state for name in "abc"} == {JobState.SUCCEEDED}


def test_a_running_job_that_becomes_poison_fails_and_its_gang_is_stopped() -> None:
    store, clock, executor, cycle = setup(num_gpus=2)
    policy = RaisesWhen(lambda ids: False)
    cycle.policy = policy
    submit(store, "long", workers=2, iterations=1000, at=0.0)
    submit(store, "next", workers=2, iterations=10, at=1.0)
    cycle.run_once()
    clock.advance_to(1.0)
    cycle.run_once()
    assert store.get("long").state == JobState.RUNNING and "long" in executor.running_jobs()

    policy._trigger = lambda ids: "long" in ids
    cycle.run_once()
    assert store.get("long").state == JobState.FAILED
    assert "long" not in executor.running_jobs()
    run_until_idle(clock, executor, cycle)
    assert store.get("next").state == JobState.SUCCEEDED


def test_bisection_asks_the_policy_about_log_many_snapshots() -> None:
    store, _, _, cycle = setup(num_gpus=64, per_node=8)
    policy = RaisesWhen(lambda ids: "j37" in ids)
    cycle.policy = policy
    for index in range(64):
        submit(store, f"j{index}", workers=1, iterations=10, at=float(index))
    cycle.run_once()
    assert store.get("j37").state == JobState.FAILED
    # 1 failing round + 1 empty probe + at most 2 per halving (6) + 1 confirmation + 1 retry
    assert policy.calls <= 1 + 1 + 2 * 6 + 1 + 1


def test_a_policy_that_raises_with_no_jobs_at_all_fails_the_round_and_no_job() -> None:
    store, _, _, cycle = setup()
    cycle.policy = RaisesWhen(lambda ids: True)
    submit(store, "a", workers=1, iterations=10, at=0.0)
    with pytest.raises(ValueError, match="block 7"):
        cycle.run_once()
    assert store.get("a").state == JobState.PENDING


def test_a_failure_that_needs_two_jobs_together_blames_neither() -> None:
    store, _, _, cycle = setup()
    cycle.policy = RaisesWhen(lambda ids: {"a", "b"} <= ids)
    submit(store, "a", workers=1, iterations=10, at=0.0)
    submit(store, "b", workers=1, iterations=10, at=1.0)
    with pytest.raises(ValueError):
        cycle.run_once()
    assert store.get("a").state == store.get("b").state == JobState.PENDING


def test_more_poison_than_one_round_isolates_spills_into_the_next_round() -> None:
    store, _, _, cycle = setup(num_gpus=8, per_node=4)
    poison = {f"p{i}" for i in range(MAX_POISON_PER_ROUND + 1)}
    cycle.policy = RaisesWhen(lambda ids: bool(ids & poison))
    for index, name in enumerate([*sorted(poison), "ok"]):
        submit(store, name, workers=1, iterations=10, at=float(index))
    with pytest.raises(ValueError):
        cycle.run_once()
    failed = {name for name in poison if store.get(name).state == JobState.FAILED}
    assert len(failed) == MAX_POISON_PER_ROUND
    cycle.run_once()
    assert all(store.get(name).state == JobState.FAILED for name in poison)
    assert store.get("ok").state == JobState.ADMITTED
