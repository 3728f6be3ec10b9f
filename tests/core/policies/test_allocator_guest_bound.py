"""Guests are priced, and HiGHS asked, only where an answer with guests could be kept.

A round skips work at two points, and neither may change its answer:

- before guests are priced (:meth:`JigsawPolicy._solve`): with every guest candidate at its
  floor price, its one-GPU exclusive column's (:meth:`Cotenancy.guest_price_floors`), a
  relaxation finds no answer cheaper than the exclusive optimum;
- before HiGHS (:func:`~jigsaw.policies.allocator.solve.solve`): the same relaxation at the
  guest columns' own prices.

The relaxation drops the slot, host, goodput and completion rows. In random co-tenancy
worlds each round must choose the same columns as the round that prices every guest and
always asks HiGHS. The worlds must also tell the cases apart: rounds skipped at each point
(free GPUs: a one-GPU job runs cheaper alone) and packs kept.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import numpy as np
import pytest

from jigsaw.model.cluster import Cluster, GpuId, Placement
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.allocator import guest_bound as guest_bound_module
from jigsaw.policies.allocator import solve as solve_module
from jigsaw.policies.allocator.config import JigsawConfig
from jigsaw.policies.allocator.configurations import EXCLUSIVE, GUEST, OFF, Column, Problem
from jigsaw.policies.allocator.cotenancy import Cotenancy
from jigsaw.policies.allocator.guest_bound import ExclusiveRound
from jigsaw.policies.allocator.guest_candidates import guest_candidates
from jigsaw.policies.allocator.objective import Objective
from jigsaw.policies.allocator.solution import Solution
from jigsaw.policies.allocator.solve import solve_exclusive
from jigsaw.policies.jigsaw import JigsawPolicy
from jigsaw.policies.shared.cost_curve import COST_GRID
from tests.core.policies.test_allocator_decisions import ORACLE, PLANNER, _policy
from tests.core.support import running_job

NOW = 3_600.0
HOST_MODELS = ("resnet50_224", "resnet50_32", "resnet18_32")


def _world(seed: int) -> Snapshot:
    """One or two 4-GPU gangs that may host guests, small rigid gangs beside them, sometimes
    a guest running on the first gang's GPU, a queue of one-GPU jobs (the guest candidates)
    and a few larger ones, on 4 to 12 GPUs."""
    rng = random.Random(seed)
    nodes = rng.choice([1, 2, 3])
    cluster = Cluster.uniform(4 * nodes, 4, gpu_memory_bytes=ORACLE.hardware.memory_bytes)
    free: list[GpuId] = list(cluster.gpu_ids())
    running: list[Job] = []
    for index in range(rng.randint(1, 2)):
        model = rng.choice(HOST_MODELS)
        spec = JobSpec(f"h{index}", model, 4, rng.choice([3_000, 10**5, 10**6]), batch_size=128)
        placement: Placement = tuple(free[:4])
        del free[:4]
        plan = full_backprop(4, ORACLE.num_blocks(model))
        running.append(running_job(spec, placement, plan, NOW - rng.uniform(300.0, 5_000.0)))
        if len(free) < 4:
            break
    for index in range(rng.randint(0, 2)):
        size = rng.choice([1, 2])
        if len(free) < size + rng.randint(0, 2):
            break
        spec = JobSpec(f"r{index}", "resnet18_32", size, 10**6, batch_size=32)
        placement = tuple(free[:size])
        del free[:size]
        plan = full_backprop(size, ORACLE.num_blocks("resnet18_32"))
        running.append(running_job(spec, placement, plan, NOW - rng.uniform(300.0, 5_000.0)))
    if rng.random() < 0.3:  # a guest running on the first gang's second GPU
        spec = JobSpec("s", "resnet18_32", 1, 10**5, batch_size=32)
        plan = full_backprop(1, ORACLE.num_blocks("resnet18_32"))
        slot: Placement = (running[0].placement[1],)
        running.append(running_job(spec, slot, plan, NOW - rng.uniform(300.0, 3_000.0)))
    waiting = [
        Job(
            f"g{index}",
            JobSpec(f"g{index}", "resnet18_32", 1, rng.choice([10**4, 10**5]), batch_size=32),
            NOW - rng.uniform(60.0, 3_000.0),
        )
        for index in range(rng.randint(1, 6))
    ]
    waiting += [
        Job(f"w{index}", JobSpec(f"w{index}", "resnet18_32", 4, 10**5), NOW - 100.0 * index)
        for index in range(rng.randint(0, 2))
    ]
    return Snapshot(NOW, cluster, tuple(waiting), tuple(running))


def _always_asked(problem: Problem) -> Solution:
    """The round as solved before the skips: HiGHS always, its answer kept by the same
    margin."""
    limits = _policy()._limits
    exclusive = solve_exclusive(problem)
    if not guest_bound_module.cheapest_guest_columns(problem):
        return exclusive
    touched = solve_module._touched(problem, exclusive)
    joint = solve_module._solve_milp(problem, touched, exclusive, limits)
    margin = guest_bound_module.margin(problem, exclusive.cost)
    if joint is not None and joint.cost < exclusive.cost - margin:
        return joint
    return exclusive


class _EveryGuestPriced(JigsawPolicy):
    """The reference: every guest column priced, HiGHS always asked."""

    def _solve(self, problem: Problem, objective: Objective, cluster: Cluster) -> Solution:
        if self.config.guests:
            cotenancy = Cotenancy(self.catalog, self.oracle, self.planner, objective, self.config)
            cotenancy.add_columns(problem, cluster)
        return _always_asked(problem)


def _bound(problem: Problem) -> float:
    guests = guest_bound_module.cheapest_guest_columns(problem)
    return guest_bound_module.guest_bound(
        problem, solve_module.solve_exclusive_round(problem), guests
    )


def _guest_columns(problem: Problem) -> list[Column]:
    return [column for column in problem.columns if column.kind == GUEST]


def test_the_skips_never_change_an_answer() -> None:
    before_pricing = before_highs = kept = 0
    for seed in range(60):
        for eta in (0.6, 1.0):
            policy = _policy(eta_of=lambda model, plan, eta=eta: eta)
            reference_policy = _EveryGuestPriced(
                ORACLE, PLANNER, eta_of=lambda model, plan, eta=eta: eta
            )
            result = policy.solve_round(_world(seed))
            reference = reference_policy.solve_round(_world(seed))
            assert result is not None and reference is not None
            # Guest columns come last, so every other column has one index in both.
            assert result.solution.chosen == reference.solution.chosen, (seed, eta)
            problem = reference.problem
            if not _guest_columns(problem):
                continue
            exclusive = solve_exclusive(problem)
            bound = _bound(problem)
            # A lower bound: no answer, the program's included, costs less.
            assert bound <= reference.solution.cost <= exclusive.cost, (seed, eta)
            if not _guest_columns(result.problem):
                before_pricing += 1
            elif bound >= exclusive.cost - guest_bound_module.margin(problem, exclusive.cost):
                before_highs += 1
            if reference.solution.solver == "highs":
                assert _guest_columns(result.problem), (seed, eta)  # a kept pack was priced
                kept += 1
    # The worlds tell the cases apart.
    assert before_pricing >= 10 and before_highs >= 3 and kept >= 5, (
        before_pricing,
        before_highs,
        kept,
    )


def test_a_witness_is_an_answer_of_the_relaxation() -> None:
    """The check skips the bound's program where the exclusive optimum, changed by hand,
    is cheaper in the relaxation (``_cheaper_by_hand``): then the program's bound is below
    the exclusive optimum too, so the witness never skips a round the program would let
    pass. The worlds hold witnesses of both kinds: a guest priced below its column, and
    guests that run giving their GPUs (with the free ones) to a waiting job."""
    below = moved = 0
    for seed in range(60):
        for eta in (0.6, 1.0):
            policy = _EveryGuestPriced(ORACLE, PLANNER, eta_of=lambda model, plan, eta=eta: eta)
            result = policy.solve_round(_world(seed))
            assert result is not None
            problem = result.problem
            prices = guest_bound_module.cheapest_guest_columns(problem)
            if not prices:
                continue
            exclusive = solve_module.solve_exclusive_round(problem)
            if not guest_bound_module._cheaper_by_hand(problem, exclusive, prices):
                continue
            bound = guest_bound_module.guest_bound(problem, exclusive, prices)
            assert bound < exclusive.solution.cost, (seed, eta)
            columns, chosen = problem.columns, exclusive.solution.chosen
            if any(price < columns[chosen[job]].cost for job, price in prices.items()):
                below += 1
            else:
                assert any(columns[chosen[job]].gpus for job in prices), (seed, eta)
                moved += 1
    assert below >= 5 and moved >= 3, (below, moved)


@pytest.mark.parametrize(("two_gpus", "pays"), [(17.0, True), (18.5, False)])
def test_a_moved_guest_pays_for_the_job_it_lets_start(two_gpus: float, pays: bool) -> None:
    """Two GPUs, one free. A guest candidate runs alone on the other (10; waiting costs 30,
    its guest column 12: a move costs 2); a two-GPU job waits (20). Moving the candidate
    lets that job start: a witness exactly when its gain, ``20 - two_gpus``, is more than
    the move's 2, and the bound's program says the same (a tie at 18: neither asks)."""
    columns = [
        Column(0, OFF, 0, 30.0, 0.0),
        Column(0, EXCLUSIVE, 1, 10.0, 1.0),
        Column(1, OFF, 0, 20.0, 0.0),
        Column(1, EXCLUSIVE, 2, two_gpus, 2.0),
    ]
    problem = Problem([], columns, [[0, 1], [2, 3]], capacity=2)
    options = [
        (np.array([0, 1]), np.array([30.0, 10.0]), [0, 1]),
        (np.array([0, 2]), np.array([20.0, two_gpus]), [2, 3]),
    ]
    exclusive = ExclusiveRound(options, Solution([1, 2], 30.0, "dp"))
    prices = {0: 12.0}
    assert guest_bound_module._cheaper_by_hand(problem, exclusive, prices) is pays
    # The skip's own test: below the optimum by more than a grid step a job (the margin).
    bound = guest_bound_module.guest_bound(problem, exclusive, prices)
    assert (bound < 30.0 - len(options) / COST_GRID) is pays


def test_no_guest_column_costs_less_than_its_floor() -> None:
    checked = 0
    for seed in range(40):
        policy = _EveryGuestPriced(ORACLE, PLANNER, eta_of=lambda model, plan: 1.0)
        snapshot = _world(seed)
        result = policy.solve_round(snapshot)
        assert result is not None
        problem = result.problem
        cotenancy = Cotenancy(policy.catalog, ORACLE, PLANNER, result.objective, policy.config)
        cotenancy._candidates = guest_candidates(problem, result.objective, PLANNER)
        floors = cotenancy.guest_price_floors(problem)
        if floors is None:  # a guest runs: keeping its slot may cost less than a start
            assert any(view.guest_of for view in problem.views)
            continue
        objective = result.objective
        for column in _guest_columns(problem):
            view = problem.views[column.job]
            alone = float(view.choices.speedups[view.choices.sizes.tolist().index(1)])
            weight, discount = objective.weight(view.job), objective.discount(view.job)
            # The floor is the guest's price at its full speed alone, and no guest runs
            # faster than alone: the objective falls as speed rises, so no guest costs less.
            at_full_speed = objective.term(weight, discount, alone, changed=True)
            assert floors[column.job] == pytest.approx(at_full_speed, rel=1e-12), seed
            assert column.speedup <= alone and floors[column.job] <= column.cost, seed
            checked += 1
    assert checked >= 30


def test_a_free_gpu_round_is_skipped_and_a_full_one_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A one-GPU job beside a host: with a free GPU it runs alone, cheaper than any slot,
    so no guest column is priced and HiGHS is not asked; with the cluster full the slot is
    its only way to run."""
    programs: list[int] = []
    run_program = solve_module._solve_milp

    def counted(problem: Problem, *args: Any) -> Solution | None:
        programs.append(problem.capacity)
        return run_program(problem, *args)

    monkeypatch.setattr(solve_module, "_solve_milp", counted)
    spec = JobSpec("host", "resnet50_224", 4, 10**6, batch_size=128)
    plan = full_backprop(4, ORACLE.num_blocks("resnet50_224"))
    host = running_job(spec, ((0, 0), (0, 1), (0, 2), (0, 3)), plan, NOW - 600.0)
    guest = Job("g", JobSpec("g", "resnet18_32", 1, 10**5, batch_size=32), NOW - 600.0)
    asked = {}
    for gpus in (4, 8):
        cluster = Cluster.uniform(gpus, 4, gpu_memory_bytes=ORACLE.hardware.memory_bytes)
        policy = _policy(eta_of=lambda model, plan: 1.0)
        result = policy.solve_round(Snapshot(NOW, cluster, (guest,), (host,)))
        assert result is not None
        asked[gpus] = bool(_guest_columns(result.problem))
    # Guests priced only on the full cluster; HiGHS asked once, there.
    assert asked == {4: True, 8: False}
    assert programs == [4]


def test_the_flat_size_program_answers_as_the_per_job_one() -> None:
    """A problem of off and exclusive columns only goes to the size program flat, its columns
    as they stand (solve_exclusive); the answer is the per-job path's, which reads each job's
    cheapest column per size, at the round's prices and at prices moved as the stability
    check moves them."""
    checked = started = 0
    for seed in range(60):
        snapshot = _world(seed)
        policy = _policy(JigsawConfig(guests=False))
        result = policy.solve_round(snapshot)
        assert result is not None
        problem = result.problem
        assert problem.exclusive_only
        rng = random.Random(seed)
        moved = [
            column._replace(cost=column.cost * rng.uniform(0.5, 1.5)) for column in problem.columns
        ]
        for priced in (problem, dataclasses.replace(problem, columns=moved)):
            flat = solve_exclusive(priced)
            per_job = dataclasses.replace(priced, exclusive_only=False)
            assert flat == solve_exclusive(per_job), seed
            checked += 1
            started += sum(priced.columns[index].gpus > 0 for index in flat.chosen)
    assert checked == 120 and started > 60, (checked, started)


def test_options_read_flat_give_the_checks_of_options_per_job() -> None:
    """A round of off and exclusive columns keeps its options flat (``flat=``); the guest
    checks read each job's slice and the curve over the others from the flat arrays. On
    random rounds (rigid pairs, elastic jobs with several sizes, jobs that may not wait)
    both give the same witness, bound and curve, for random candidate prices."""
    from jigsaw.policies.shared.cost_curve import Flat

    for seed in range(60):
        rng = random.Random(seed)
        capacity = rng.randint(2, 24)
        columns: list[Column] = []
        by_job: list[list[int]] = []
        options = []
        for job in range(rng.randint(1, 90)):
            sizes = sorted(rng.sample(range(1, 9), rng.randint(1, 3)))
            if rng.random() < 0.9:
                sizes = [0, *sizes]
            costs = [round(rng.uniform(1.0, 60.0), 3) for _ in sizes]
            start = len(columns)
            for size, cost in zip(sizes, costs, strict=True):
                columns.append(Column(job, EXCLUSIVE if size else OFF, size, cost, float(size)))
            by_job.append(list(range(start, len(columns))))
            options.append((np.array(sizes), np.array(costs), by_job[-1]))
        problem = Problem([], columns, by_job, capacity=capacity)
        if sum(min(o[0]) for o in options) > capacity:
            continue  # no answer fits
        chosen = solve_exclusive(problem).chosen
        solution = Solution(chosen, sum(columns[i].cost for i in chosen), "dp")
        flat = Flat(
            np.array([c.gpus for c in columns]),
            np.array([c.cost for c in columns]),
            np.array([len(indices) for indices in by_job]),
        )
        candidates = rng.sample(range(len(by_job)), min(len(by_job), rng.randint(1, 12)))
        prices = {job: round(rng.uniform(1.0, 60.0), 3) for job in candidates}
        per_job = ExclusiveRound(options, solution)
        read_flat = ExclusiveRound(None, solution, flat=flat)
        assert guest_bound_module._cheaper_by_hand(
            problem, per_job, prices
        ) == guest_bound_module._cheaper_by_hand(problem, read_flat, prices)
        assert guest_bound_module.guest_bound(
            problem, per_job, prices
        ) == guest_bound_module.guest_bound(problem, read_flat, prices)
        left, curve = per_job.curve_without(problem, prices.keys())
        left_flat, curve_flat = read_flat.curve_without(problem, prices.keys())
        assert left == left_flat and curve.constant == curve_flat.constant
        assert curve.values.tolist() == curve_flat.values.tolist()
