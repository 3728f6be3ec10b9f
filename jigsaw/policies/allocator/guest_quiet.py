"""Whether guests stay priced out of a co-tenancy round that decided nothing until the world
changes: what lets such a round be quiet (:mod:`.stability`).

A round that decided nothing keeps every job as it is, so its answer's cost stays what it is
while no job arrives, ends or changes: a kept column restarts nothing (no discount) and
weights are fixed between events (no aging). The exclusive answer holds by the quiet-round
rules of :mod:`.stability`. What moves are the prices of columns that change something, and
each only falls as the jobs age, towards its discount's limit of 1: a job's start or resize,
a host's staircase (never below its keep column: it keeps at most full backprop's goodput),
each guest column, and what a staircase host loses to its guest (at least 0). The candidates,
the slots and the co-location shares stay as they are. So a bound on every answer with
guests, built with every such price at its limit, holds at every moment until the next event:
the Lagrangian bound of the 0-1 program (:func:`~.joint_bound.program_may_pay`) over every
guest and slot priced (before the filters that keep a round's program small: a later round's
columns are among them), each at its limit, the hosts' own columns at theirs, and the
completion row left out (its paces move as running jobs progress; its multiplier is then 0,
which the bound allows for any answer). A round that ended at the guests' floor check, before
guests were priced, is not made quiet: at the limit each candidate's floor (its one-GPU start
at discount 1) is below its wait, so the guests' relaxation at those prices always finds an
answer cheaper than waiting.

When the bound reaches the exclusive answer's cost less the margin a joint answer must win
by (:func:`~.guest_bound.margin`), no later round of the spell keeps a joint answer, so each
decides nothing, as this one did. tests/core/policies/test_guest_quiet.py asks quiet rounds
again at later moments; the replays of Philly's fortnights keep their decision logs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from jigsaw.model.cluster import GpuId
from jigsaw.model.plan import Plan
from jigsaw.policies.allocator.configurations import (
    EXCLUSIVE,
    GUEST,
    HOST,
    Column,
    Problem,
)
from jigsaw.policies.allocator.guest_bound import margin
from jigsaw.policies.allocator.joint_bound import program_may_pay
from jigsaw.policies.allocator.objective import Objective
from jigsaw.policies.allocator.solution import Solution


class GuestPair(NamedTuple):
    """A guest and a slot as :meth:`~.cotenancy.Cotenancy.add_guests` priced them."""

    job: int
    needs: int
    """The host's column offering the slot."""
    slot: GpuId
    speedup: float
    """The guest's speedup there."""
    host_loss: float
    host_cost: float
    """What the host's term loses: as priced for a host kept as it runs (it restarts
    nothing), 0 for a staircase host (its least; ``-inf`` where the model gave the host a
    share above 1, so no least is known)."""


def guest_limits(
    problem: Problem,
    objective: Objective,
    candidates: Sequence[tuple[int, Plan, float]],
    pairs: Sequence[GuestPair],
) -> tuple[Column, ...] | None:
    """Every guest column priced, at its limit: the guest's term at discount 1. ``None``
    where a candidate is a guest now (keeping its slot is no start) or some host's least
    loss is unknown."""
    weights: dict[int, float] = {}
    for job, _, _ in candidates:
        view = problem.views[job]
        if view.guest_of is not None:
            return None
        weights[job] = objective.weight(view.job)
    limit_pairs: list[Column] = []
    for pair in pairs:
        if pair.host_cost == -math.inf:
            return None
        cost = objective.term(weights[pair.job], 1.0, pair.speedup, changed=True)
        limit_pairs.append(
            Column(
                pair.job,
                GUEST,
                0,
                cost,
                pair.speedup,
                needs=pair.needs,
                slot=pair.slot,
                host_loss=pair.host_loss,
                host_cost=pair.host_cost,
            )
        )
    return tuple(limit_pairs)


GUEST_HORIZON_S = 3_600.0
"""How far ahead a quiet co-tenancy round is promised: prices are bounded by the discounts
reached by then (far below their limit of 1 for a job preempted minutes ago), and the quiet
spell ends there at the latest."""


def guests_stay_out(problem: Problem, chosen: Sequence[int], objective: Objective) -> float | None:
    """Until when no answer with guests can be kept over ``chosen`` (the answer of a round
    that decided nothing) unless the world changes: ``now`` plus :data:`GUEST_HORIZON_S`,
    where the bound holds with every moving price at its value then (a discount only rises
    with age, so each price is at least that until then); ``None``: it may not."""
    limits = problem.guest_limits
    if limits is None:
        return None
    columns = problem.columns
    if any(columns[index].kind in (GUEST, HOST) for index in chosen):
        return None  # a guest or a host keeps its slot: not what this check bounds
    cost = sum(columns[index].cost for index in chosen) + problem.set_aside_cost
    target = cost - margin(problem, cost)
    kept = Solution(list(chosen), cost, "dp")
    touched: set[int] = set()
    for pair in limits:
        assert pair.needs is not None
        touched.add(pair.job)
        touched.add(columns[pair.needs].job)
    until = objective.now + GUEST_HORIZON_S
    later = dataclasses.replace(objective, now=until)
    # Only the touched jobs' columns are read: every other job keeps its chosen column.
    at_limit = _at_limit(problem, objective, touched, later)
    by_job = list(problem.by_job)
    for job in touched:
        by_job[job] = [i for i in by_job[job] if columns[i].kind != GUEST]
    guests = [
        pair._replace(
            cost=objective.term(
                objective.weight(problem.views[pair.job].job),
                later.discount(problem.views[pair.job].job),
                pair.speedup,
                changed=True,
            )
        )
        for pair in limits
    ]
    for offset, pair in enumerate(guests, start=len(at_limit)):
        by_job[pair.job].append(offset)
    limit = dataclasses.replace(problem, columns=[*at_limit, *guests], by_job=by_job, pace=[])
    return None if program_may_pay(limit, touched, kept, target) else until


def _at_limit(
    problem: Problem, objective: Objective, jobs: Iterable[int], later: Objective | None = None
) -> list[Column]:
    """The round's columns with every exclusive or host column of ``jobs`` that starts,
    resizes, moves or switches its job priced at its discount at ``later``'s moment (at 1,
    its limit, without ``later``): the least it costs until then (a job whose discount is 1
    already keeps its prices)."""
    columns = list(problem.columns)
    for index in jobs:
        view = problem.views[index]
        if objective.discount(view.job) == 1.0:
            continue
        discount = later.discount(view.job) if later is not None else 1.0
        held = len(view.current) if view.guest_of is None else -1
        weight: float | None = None
        for column_index in problem.by_job[index]:
            column = columns[column_index]
            moves = column.kind == HOST or (column.kind == EXCLUSIVE and column.gpus != held)
            if not moves:
                continue
            if weight is None:
                weight = objective.weight(view.job)
            cost = objective.term(weight, discount, column.speedup, changed=True)
            columns[column_index] = column._replace(cost=min(cost, column.cost))
    return columns
