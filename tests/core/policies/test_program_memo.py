"""The size program with a memo of its last run answers as the whole program does, round
after round, while jobs come and go, costs move and the capacity left to it changes."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from jigsaw.policies.shared.pollux_allocation import (
    Infeasible,
    _program,
    choose_options,
    cost_curve,
)
from jigsaw.policies.shared.program_memo import ProgramMemo

Options = list[tuple[np.ndarray, np.ndarray]]


def _job(rng: np.random.Generator, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """A rigid job (off or one size, sometimes larger than the cluster), an elastic one, or
    a protected elastic one (no off option). Costs are real numbers, as a round's are, and
    rigid jobs of one class repeat exactly (ties)."""
    kind = rng.uniform()
    if kind < 0.75:
        size = int(rng.choice([1, 1, 1, 2, 2, 4, 8, capacity - 1, capacity + 3]))
        if rng.uniform() < 0.5:
            return np.array([0, size]), np.array([31.6, 1.25])
        return np.array([0, size]), np.array([rng.uniform(20, 40), rng.uniform(0.5, 3)])
    sizes = sorted(rng.choice(np.arange(1, 9), 3, replace=False).tolist())
    if kind < 0.95:
        costs = [31.6, *rng.uniform(0.5, 12.0, size=3)]
        return np.array([0, *sizes]), np.array(costs)
    return np.array(sizes), rng.uniform(0.5, 12.0, size=3)


def _next_round(rng: np.random.Generator, options: Options, capacity: int) -> Options:
    """What a round changes: some jobs end (anywhere in the list), some costs move, new jobs
    arrive at the end, and jobs pinned at one size come and go."""
    kept = [option for option in options if rng.uniform() > 0.01]
    if kept and rng.uniform() < 0.5:
        index = int(rng.integers(len(kept) // 2, len(kept)))
        sizes, costs = kept[index]
        kept[index] = (sizes, costs * rng.uniform(0.8, 1.2))
    kept = [option for option in kept if len(option[0]) > 1 or rng.uniform() < 0.8]
    kept.extend(_job(rng, capacity) for _ in range(int(rng.integers(0, 8))))
    for _ in range(int(rng.integers(0, 2))):
        kept.insert(int(rng.integers(0, len(kept) + 1)), (np.array([1]), np.array([2.0])))
    return kept


def _whole(options: Options, capacity: int) -> list[int] | None:
    try:
        return choose_options(options, capacity)
    except Infeasible:
        return None


def _programmed(
    options: Options, capacity: int, memo: ProgramMemo | None = None
) -> list[int] | None:
    """The size program's answer over every job given (``None``: none fits)."""
    try:
        return _program(options, capacity, memo)
    except Infeasible:
        return None


@pytest.mark.parametrize("seed", range(25))
def test_a_kept_program_answers_as_a_fresh_one_every_round(seed: int) -> None:
    rng = np.random.default_rng(7_000 + seed)
    memo, whole_memo = ProgramMemo(), ProgramMemo()
    capacity = int(rng.integers(8, 24))
    options = [_job(rng, capacity) for _ in range(int(rng.integers(60, 140)))]
    for _ in range(30):
        want = _whole(options, capacity)
        try:
            got: list[int] | None = choose_options(options, capacity, memo)
        except Infeasible:
            got = None
        assert got == want
        # The memo's own program, over every job (no job dropped first), as well.
        several = [option for option in options if len(option[0]) > 1]
        assert _programmed(several, capacity, whole_memo) == _programmed(several, capacity)
        options = _next_round(rng, options, capacity)
        if rng.uniform() < 0.2:
            capacity = max(4, capacity + int(rng.integers(-3, 4)))
    for used in (memo, whole_memo):
        assert used.reused > 200, "the memo was hardly used: the test shows nothing"


def test_a_round_that_differs_only_at_its_end_adds_only_its_end() -> None:
    rng = np.random.default_rng(11)
    options = [_job(rng, 16) for _ in range(50)]
    several = [option for option in options if len(option[0]) > 1]
    memo = ProgramMemo()
    _program(several, 16, memo)
    assert (memo.reused, memo.added) == (0, len(several))
    changed = [*several[:-3], (np.array([0, 2]), np.array([30.0, 1.0]))]
    assert _program(changed, 12, memo) == _program(changed, 12)
    assert (memo.reused, memo.added) == (len(several) - 3, len(several) + 1)
    # A larger capacity than the memo's starts it afresh.
    assert _program(changed, 20, memo) == _program(changed, 20)
    assert memo.reused == len(several) - 3


@pytest.mark.parametrize("seed", range(10))
def test_a_trial_run_answers_as_the_whole_program_and_leaves_the_memo_as_it_was(
    seed: int,
) -> None:
    """The quiet-round check's program (:meth:`ProgramMemo.trial`) resumes from the round's
    run at other prices (its end moved): its answer is the whole program's, and the next
    round still resumes from the round's own run, not from the trial's."""
    rng = np.random.default_rng(13_000 + seed)
    capacity = int(rng.integers(8, 24))
    memo = ProgramMemo()
    options = [_job(rng, capacity) for _ in range(int(rng.integers(60, 120)))]
    trials = 0
    for _ in range(20):
        several = [option for option in options if len(option[0]) > 1]
        assert _programmed(several, capacity, memo) == _programmed(several, capacity)
        repriced = [
            (sizes, costs * rng.uniform(0.5, 1.5)) if index >= len(several) // 2 else (sizes, costs)
            for index, (sizes, costs) in enumerate(several)
        ]
        want = _programmed(repriced, capacity)
        before = (memo.reused, memo.added)
        trial = memo.trial()
        for _ in range(2):  # a second trial resumes from the round's run as well
            assert _programmed(repriced, capacity, trial) == want
            trials += 1
        assert (memo.reused, memo.added) == before, "a trial counts as no run of the memo's"
        # The round's jobs asked again resume from the round's run whole: nothing is added.
        with contextlib.suppress(Infeasible):
            _program(several, capacity, memo)
        assert memo.added == before[1], "the round's own run was replaced by the trial's"
        options = _next_round(rng, options, capacity)
    assert trials == 40


def test_a_job_with_more_options_than_a_byte_holds_is_chosen_right() -> None:
    """Choices are kept as bytes while every job has at most 127 options; a job with more
    (an elastic job allowed every size of a 300-GPU cluster) widens them, and the answers
    stay the whole program's, before, at and after it."""
    rng = np.random.default_rng(5)
    capacity = 300
    rigid = [_job(rng, capacity) for _ in range(40)]
    sizes = np.arange(0, capacity + 1)
    # Cheapest at its largest sizes: the pick is above 127, which a byte would wrap.
    wide = (sizes, 100.0 - sizes * 0.3 + rng.uniform(0, 0.01, size=len(sizes)))
    memo = ProgramMemo()
    for options in (rigid, [*rigid, wide], [wide, *rigid], rigid):
        several = [option for option in options if len(option[0]) > 1]
        want = _program(several, capacity)
        assert _program(several, capacity, memo) == want
    assert max(_program([*rigid, wide], capacity, memo)) > 127


@pytest.mark.parametrize("seed", range(10))
def test_a_cost_curve_from_a_memo_is_the_curve_built_afresh(seed: int) -> None:
    """The guest bound's curve (:func:`cost_curve` with a memo of its own) equals the one
    built afresh to the bit, its values plus its constant, round after round: jobs come and go,
    costs move, jobs pinned at one size shift its start, some jobs are larger than the GPUs
    and the capacity moves below the memo's."""
    rng = np.random.default_rng(9_000 + seed)
    memo = ProgramMemo()
    capacity = int(rng.integers(8, 24))
    options = [_job(rng, capacity) for _ in range(int(rng.integers(60, 140)))]
    for _ in range(30):
        fresh = cost_curve(options, capacity)
        kept = cost_curve(options, capacity, memo)
        # A job larger than the round's GPUs waits in the curve's values afresh and in its
        # constant from the memo (it is a pair there): the sums are the same, to the bit.
        assert np.array_equal(kept.values + kept.constant, fresh.values + fresh.constant)
        assert kept.least() == fresh.least()
        options = _next_round(rng, options, capacity)
        if rng.uniform() < 0.2:
            capacity = max(4, capacity + int(rng.integers(-3, 4)))
    assert memo.reused > 200, "the memo was hardly used: the test shows nothing"
