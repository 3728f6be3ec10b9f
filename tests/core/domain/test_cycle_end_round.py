"""The cycle's sixth step: a policy that carries state between rounds keeps it in
``end_round``, once per round, after the decisions are applied, with the snapshot they were
decided from (poison jobs taken out); deciding, the poison bisection's included, writes
nothing. Gavel's fifo under quotas keeps its allocation through the quota wrapper."""

from __future__ import annotations

from jigsaw.model.decisions import Decision
from jigsaw.model.hardware import preset
from jigsaw.model.lifecycle import JobState
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.planning.planner import Planner
from jigsaw.policies import create_policy
from jigsaw.policies.base import KeepsRoundState, PolicyBase
from jigsaw.policies.builder import build_policy
from jigsaw.policies.quota import Quotas
from jigsaw.scheduling.memstore import InMemoryStore
from tests.core.support import setup, submit


class RecordsRounds(PolicyBase):
    """FIFO that raises with a job named ``bad`` and records what ``end_round`` is handed,
    with the states the store holds at that moment."""

    name = "fifo"

    def __init__(self, store: InMemoryStore) -> None:
        self._fifo = create_policy("fifo", planner=Planner())
        self._store = store
        self.ended: list[tuple[float, set[str], dict[str, JobState]]] = []

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        if any(job.id == "bad" for job in snapshot.waiting):
            raise ValueError("no profile for block 7")
        return self._fifo.decide(snapshot)

    def end_round(self, snapshot: Snapshot) -> None:
        ids = {job.id for job in (*snapshot.waiting, *snapshot.running)}
        states = {job_id: self._store.get(job_id).state for job_id in sorted(ids)}
        self.ended.append((snapshot.now, ids, states))


def test_end_round_comes_once_per_round_after_apply_with_the_snapshot_decided_from() -> None:
    store, clock, _executor, cycle = setup(num_gpus=4)
    policy = RecordsRounds(store)
    assert isinstance(policy, KeepsRoundState)
    cycle.policy = policy
    for index, name in enumerate(["a", "bad", "b"]):
        submit(store, name, workers=1, iterations=20, at=float(index))
    cycle.run_once()
    # The bisection asked about parts of the round's snapshot; end_round came once, without
    # the poison job, after the starts were recorded.
    ((at, ids, states),) = policy.ended
    assert (at, ids) == (0.0, {"a", "b"})
    assert states == {"a": JobState.ADMITTED, "b": JobState.ADMITTED}
    clock.advance_to(1.0)
    cycle.run_once()
    assert [round_[0] for round_ in policy.ended] == [0.0, 1.0]


def test_gavel_fifo_under_quotas_keeps_its_allocation_through_the_wrapper() -> None:
    """The wrapper hands ``end_round`` the snapshot its inner policy decided from: a job its
    quota holds back is not in Gavel's allocation, the one it lets start is."""
    store, _clock, _executor, cycle = setup(num_gpus=4)
    cycle.policy = build_policy(
        "fifo",
        Oracle(preset("v100")),
        {"ranking": "gavel"},
        quotas=Quotas({"default": 1}, {}),
    )
    submit(store, "a", workers=1, iterations=20, at=0.0)
    submit(store, "b", workers=2, iterations=20, at=1.0)  # over its queue's quota: hidden
    cycle.run_once()
    gavel = cycle.policy.inner._gavel  # type: ignore[attr-defined]
    assert dict(gavel.state.allocation) == {"a": 1.0}
    assert (store.get("a").state, store.get("b").state) == (JobState.ADMITTED, JobState.PENDING)
