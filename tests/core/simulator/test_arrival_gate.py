"""The replay's arrival gate: arrivals enter in time order, or wait for Gavel's reset."""

from __future__ import annotations

from jigsaw.model.domain import JobSpec
from jigsaw.simulator.allocation_resets import AllocationResets
from jigsaw.simulator.arrival_gate import ArrivalGate
from jigsaw.simulator.workload import Arrival
from jigsaw.traces.record import TraceJob


def arrival(name: str, at: float) -> Arrival:
    return Arrival(
        name, at, JobSpec(name, "mlp", 1, 10), TraceJob(name, at, 1, "mlp", 32, iterations=10)
    )


ARRIVALS = [arrival("a", 0.0), arrival("b", 10.0), arrival("c", 10.0), arrival("d", 50.0)]


def test_arrivals_enter_in_time_order_once_due() -> None:
    entered: list[str] = []
    gate = ArrivalGate(ARRIVALS, None, lambda a: entered.append(a.job_id))
    assert gate.admit_until(5.0, newcomers_blocked=False) == (True, True)
    assert entered == ["a"] and gate.next_at() == 10.0
    assert gate.admit_until(10.0, newcomers_blocked=True) == (True, False)  # behind a waiter
    assert entered == ["a", "b", "c"] and not gate.all_arrived
    assert gate.admit_until(20.0, newcomers_blocked=False) == (False, False)
    assert gate.opens_round(20.0, idle_and_all_arrived=False, decides_between_resets=False)


def test_allocation_resets_hold_arrivals_until_a_reset_releases_them() -> None:
    entered: list[str] = []
    resets = AllocationResets(interval_s=100.0)
    gate = ArrivalGate(ARRIVALS, resets, lambda a: entered.append(a.job_id))
    assert gate.admit_until(0.0, newcomers_blocked=True) == (True, True)  # a held one changes
    assert entered == [] and gate.holding
    # The first reset (the clock starts at 0) lets "a" in; fifo would decide now.
    assert gate.opens_round(0.0, idle_and_all_arrived=False, decides_between_resets=False)
    assert entered == ["a"] and not gate.holding
    gate.admit_until(10.0, newcomers_blocked=False)
    # Gavel's quirk: a reset at time 0 leaves its clock at 0, so the next change resets at once.
    assert gate.opens_round(10.0, idle_and_all_arrived=False, decides_between_resets=False)
    assert entered == ["a", "b", "c"]
    gate.admit_until(50.0, newcomers_blocked=False)
    # 40 s after the last reset: none yet, so a policy outside rounds (fifo) does not decide.
    assert not gate.opens_round(50.0, idle_and_all_arrived=False, decides_between_resets=False)
    assert gate.opens_round(50.0, idle_and_all_arrived=False, decides_between_resets=True)
    assert entered == ["a", "b", "c"] and gate.holding
    assert gate.opens_round(110.0, idle_and_all_arrived=False, decides_between_resets=False)
    assert entered == ["a", "b", "c", "d"] and gate.all_arrived
