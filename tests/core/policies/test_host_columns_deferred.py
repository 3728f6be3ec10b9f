"""Where no gang hosts now, host columns and slots wait until guests may be priced.

:meth:`~jigsaw.policies.allocator.cotenancy.Cotenancy.offer_slots` then finds only whether
some slot exists; the staircases' host columns and the slot list are built by
:meth:`~jigsaw.policies.allocator.cotenancy.Cotenancy.add_guests`, after the guests' floor
check. That is exact only because a host column costs at least its gang's keep column
where its staircase keeps at most full backprop's goodput; where a staircase keeps more
(eta 1: SPB only saves time), the round prices it at once, and a gang old enough that its
restart costs almost nothing may then switch to it with no guest at all. Against rounds
that always build them first, in random co-tenancy worlds: the same answers and co-tenancy
flag, and the cases told apart (rounds that never built a host column, rounds that built
them at once, staircases taken without guests).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.allocator import cotenancy as cotenancy_module
from jigsaw.policies.allocator.configurations import GUEST, HOST
from jigsaw.policies.allocator.offering_gangs import slot_exists
from tests.core.policies.test_allocator_decisions import _policy
from tests.core.policies.test_allocator_guest_bound import NOW, _world

_Round = tuple[list[int], bool, int, int, int]


def _kinds(problem: Any, kind: str) -> int:
    return sum(1 for column in problem.columns if column.kind == kind)


def _snapshot(seed: int, old_hosts: bool) -> Snapshot:
    """``old_hosts``: the four-GPU gangs submitted 10^7 s ago (a restart's discount ~1)."""
    snapshot = _world(seed)
    if not old_hosts:
        return snapshot
    running = tuple(
        dataclasses.replace(job, submitted_at=NOW - 1e7) if job.spec.workers == 4 else job
        for job in snapshot.running
    )
    return Snapshot(snapshot.now, snapshot.cluster, snapshot.waiting, running)


def _rounds(old_hosts: bool) -> list[_Round]:
    """Per world and eta: chosen columns, co-tenancy offered, host and guest columns built,
    host columns chosen with no guest chosen."""
    found: list[_Round] = []
    for seed in range(60):
        for eta in (0.6, 1.0):
            policy = _policy(eta_of=lambda model, plan, eta=eta: eta)
            result = policy.solve_round(_snapshot(seed, old_hosts))
            assert result is not None
            problem, chosen = result.problem, result.solution.chosen
            kinds = [problem.columns[index].kind for index in chosen]
            alone = kinds.count(HOST) if GUEST not in kinds else 0
            hosts, guests = _kinds(problem, HOST), _kinds(problem, GUEST)
            found.append((chosen, problem.cotenancy_offered, hosts, guests, alone))
    return found


@pytest.mark.parametrize("old_hosts", [False, True])
def test_host_columns_wait_and_change_no_answer(
    monkeypatch: pytest.MonkeyPatch, old_hosts: bool
) -> None:
    at_once = 0

    def counted(problem: Any, gangs: Any) -> bool | None:
        nonlocal at_once
        found = slot_exists(problem, gangs)
        at_once += found is None
        return found

    monkeypatch.setattr(cotenancy_module, "slot_exists", counted)
    deferred = _rounds(old_hosts)
    monkeypatch.setattr(cotenancy_module, "slot_exists", lambda problem, gangs: None)
    eager = _rounds(old_hosts)
    waited = 0
    for case, (ours, reference) in enumerate(zip(deferred, eager, strict=True)):
        chosen, offered, hosts, guests, alone = ours
        assert (chosen, offered, guests, alone) == (
            reference[0],
            reference[1],
            reference[3],
            reference[4],
        ), case
        if hosts < reference[2]:
            assert guests == 0, case  # ended at the floor check: no host column was built
            waited += 1
        else:
            assert hosts == reference[2], case
    assert waited >= 8 and at_once >= 30, (waited, at_once)
    if old_hosts:  # the guard's case: a staircase cheaper than the keep column
        assert sum(entry[4] for entry in eager) >= 10
