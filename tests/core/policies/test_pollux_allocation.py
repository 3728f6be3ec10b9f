"""The size program's shortcut: rigid jobs it would leave out are dropped before it runs, and
its answer, ties included, is the one the whole program gives."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from jigsaw.policies.shared import cost_curve, pollux_allocation
from jigsaw.policies.shared.pollux_allocation import Infeasible, choose_options

Options = list[tuple[np.ndarray, np.ndarray]]
DATA = Path(__file__).resolve().parents[2] / "data"


def _random_round(rng: np.random.Generator, capacity: int) -> Options:
    """A round as a backlog makes it: many rigid jobs whose costs repeat exactly (jobs that
    never ran, of one size, cost the same), some elastic jobs, and a few that may not wait.
    Costs are small integers, so every sum is exact and ties are real ties."""
    options: Options = []
    forced = 0
    for _ in range(int(rng.integers(80, 200))):
        kind = rng.uniform()
        if kind < 0.8:
            size = int(rng.choice([1, 1, 1, 2, 2, 4, 8, capacity + 1]))
            off = float(rng.integers(20, 22))
            on = float(rng.integers(1, 3))
            options.append((np.array([0, size]), np.array([off, on])))
        elif kind < 0.95:
            sizes = np.array([0, *sorted(rng.choice(np.arange(1, 9), 3, replace=False))])
            costs = np.array([30.0, *rng.integers(1, 12, size=3).astype(float)])
            options.append((sizes, costs))
        elif forced < 2:
            forced += 1
            size = int(rng.integers(1, 3))
            options.append((np.array([size]), np.array([float(rng.integers(1, 5))])))
    return options


def _answers_as_the_whole_program(options: Options, capacity: int) -> list[int] | None:
    """:func:`choose_options` and the dynamic program over every job agree: the same picks,
    or both infeasible (``None``)."""
    try:
        whole = pollux_allocation._program(options, capacity)
    except Infeasible:
        with pytest.raises(Infeasible):
            choose_options(options, capacity)
        return None
    assert choose_options(options, capacity) == whole
    return whole


@pytest.mark.parametrize("seed", range(40))
def test_dropping_the_dominated_rigid_jobs_keeps_the_programs_answer(seed: int) -> None:
    rng = np.random.default_rng(seed)
    capacity = int(rng.integers(4, 16))
    options = _random_round(rng, capacity)
    dominated = pollux_allocation._dominated_pairs(options, capacity)
    assert dominated, "a backlog of identical rigid jobs must leave some out of the program"
    whole = _answers_as_the_whole_program(options, capacity)
    assert whole is None or all(whole[job] == 0 for job in dominated)


@pytest.mark.parametrize("seed", range(40))
def test_jobs_with_one_option_leave_the_program_its_answer(seed: int) -> None:
    """Jobs that may not wait, at one size, take it and leave the rest of the program the
    GPUs left: many of them among rigid and elastic jobs, ties included."""
    rng = np.random.default_rng(1_000 + seed)
    capacity = int(rng.integers(8, 24))
    options = _random_round(rng, capacity)
    for _ in range(int(rng.integers(1, 8))):
        where = int(rng.integers(0, len(options) + 1))
        size, cost = int(rng.integers(1, 4)), float(rng.integers(1, 5))
        options.insert(where, (np.array([size]), np.array([cost])))
    _answers_as_the_whole_program(options, capacity)


def test_equal_rigid_jobs_start_in_list_order_and_the_rest_are_dropped() -> None:
    """Ten identical one-GPU jobs on four GPUs: the first four run (the program's tie rule),
    and the last six never reach the program."""
    options: Options = [(np.array([0, 1]), np.array([10.0, 1.0])) for _ in range(10)]
    options += [(np.array([0, 1]), np.array([0.0, 0.0])) for _ in range(60)]  # gain nothing
    dominated = pollux_allocation._dominated_pairs(options, 4)
    assert set(range(4, 10)) <= dominated and not dominated & set(range(4))
    assert choose_options(options, 4)[:10] == [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]


def test_a_job_gaining_more_is_never_dropped_behind_earlier_ones() -> None:
    options: Options = [(np.array([0, 2]), np.array([10.0, 5.0])) for _ in range(70)]
    options.append((np.array([0, 2]), np.array([10.0, 1.0])))  # last, but gains most
    picks = choose_options(options, 4)
    assert picks[-1] == 1 and sum(picks) == 2
    assert 70 not in pollux_allocation._dominated_pairs(options, 4)


def test_of_equal_jobs_the_earliest_run_in_a_real_backlog_round() -> None:
    """A round jigsaw's program ran on Philly's October (256 GPUs, 289 jobs, a backlog of
    equal one-GPU jobs). Summed as floats come, the whole program started later equal jobs
    before earlier ones (a rounding error of one unit in the last place); on the cost grid
    its sums are exact and the earliest run, and the shortcut gives the same answer."""
    data = json.loads((DATA / "size_program_backlog_round.json").read_text())
    capacity = data["capacity"]
    options: Options = [(np.array(s), np.array(c)) for s, c in data["options"]]
    whole = pollux_allocation._program(options, capacity)  # it reads each cost on the grid
    assert choose_options(options, capacity) == whole
    equal: dict[tuple[float, ...], list[int]] = {}
    for job, (sizes, costs) in enumerate(options):
        if sizes.tolist()[0] == 0 and len(sizes) == 2:
            equal.setdefault((*sizes.tolist(), *costs.tolist()), []).append(whole[job])
    assert any(0 < sum(ran) < len(ran) for ran in equal.values()), "no class is split"
    for ran in equal.values():
        assert ran == sorted(ran, reverse=True), "a later equal job ran before an earlier one"


def test_the_scalar_and_the_array_grid_round_alike() -> None:
    costs = np.random.default_rng(0).uniform(0.0, 2_000.0, 1_000)
    costs[:3] = [0.5 / cost_curve.COST_GRID, 1.5 / cost_curve.COST_GRID, 31.6]
    gridded = cost_curve._on_grid(costs)
    assert gridded.tolist() == [cost_curve._grid(cost) for cost in costs.tolist()]
    assert (gridded * cost_curve.COST_GRID == np.round(gridded * 2.0**16)).all()


def _grid_sum(options: Options, picks: list[int]) -> float:
    grid = cost_curve.COST_GRID
    return sum(
        round(float(costs[pick]) * grid) / grid
        for (_, costs), pick in zip(options, picks, strict=True)
    )


@pytest.mark.parametrize("seed", range(30))
def test_the_cost_curve_finished_on_a_copy_is_the_programs_optimum(seed: int) -> None:
    """The values-only program that the guest bound keeps (a curve over most jobs, its
    dominated rigid jobs left out, then finished on a copy with the rest) reaches the
    whole program's optimum, on the grid, in every random backlog. The jobs added later
    include ones that may not wait, and their cheaper waits can only lower it."""
    rng = np.random.default_rng(2_000 + seed)
    capacity = int(rng.integers(4, 16))
    options = _random_round(rng, capacity)
    picks = _answers_as_the_whole_program(options, capacity)
    if picks is None:
        return
    split = int(rng.integers(0, len(options)))
    kept = pollux_allocation.cost_curve(options[:split], capacity)
    if split >= 64:
        assert pollux_allocation._dominated_pairs(options[:split], capacity)
    finished = kept.copy()
    for sizes, costs in options[split:]:
        finished.add(sizes, costs)
    assert finished.least() == _grid_sum(options, picks)
    # The kept curve is not changed by finishing its copy.
    again = kept.copy()
    for sizes, costs in options[split:]:
        again.add(sizes, costs)
    assert again.least() == finished.least()
    # A job that waits for less makes the optimum no dearer.
    cheaper = kept.copy()
    for sizes, costs in options[split:]:
        cheaper.add(sizes, np.where(sizes == 0, costs - 1.0, costs))
    assert cheaper.least() <= finished.least()
