"""``WorkLeft`` keeps each job's pace while the job is the same object: its answers equal
``remaining_seconds`` to the bit, and a job replaced by its next state is priced afresh."""

from __future__ import annotations

import math
from dataclasses import replace

from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import full_backprop
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies.allocator.job_memo import GENERATION_ROUNDS
from jigsaw.policies.allocator.remaining import RunningSeconds, WorkLeft, remaining_seconds
from jigsaw.policies.shared.plans import PlanCatalog
from jigsaw.simulator import SimulationSetup, make_oracle
from tests.core.support import running_job

ORACLE = make_oracle(SimulationSetup())
PLANNER = Planner(ORACLE.hardware, catalog=ModelCatalog(ORACLE.profiles))
NOW = 10_000.0


def _catalog() -> PlanCatalog:
    return PlanCatalog(ORACLE, planner=PLANNER)


def test_answers_equal_remaining_seconds_for_running_and_waiting_jobs() -> None:
    catalog = _catalog()
    work = WorkLeft(catalog)
    jobs = [
        Job("w", JobSpec("w", "resnet18_32", 2, 5_000), submitted_at=0.0),
        running_job(
            JobSpec("r", "resnet18_32", 4, 90_000),
            ((0, 0), (0, 1), (0, 2), (0, 3)),
            full_backprop(4, 4),
            NOW - 1_234.5,
        ),
        Job("unknown", JobSpec("unknown", "no-such-model", 1, 10), submitted_at=0.0),
    ]
    for _ in range(3):  # the first round prices, the next ones read what was kept
        work.next_round()
        for job in jobs:
            for running in (False, True):
                expected = remaining_seconds(catalog, job, NOW, running)
                assert work.seconds(job, NOW, running) == expected
    assert math.isinf(work.seconds(jobs[2], NOW, False))


def test_a_replaced_job_is_priced_afresh_and_unused_entries_are_dropped() -> None:
    catalog = _catalog()
    work = WorkLeft(catalog)
    small = Job("j", JobSpec("j", "resnet18_32", 1, 1_000, batch_size=32), submitted_at=0.0)
    work.next_round()
    before = work.seconds(small, NOW, False)
    bigger = replace(small, spec=replace(small.spec, batch_size=256))  # a slower iteration
    work.next_round()
    after = work.seconds(bigger, NOW, False)
    assert after == remaining_seconds(catalog, bigger, NOW, False) and after != before
    memo = work._memo
    for _ in range(GENERATION_ROUNDS):  # within a generation and the next: kept
        work.next_round()
        assert any(kept[0] is small for kept in [*memo._this.values(), *memo._last.values()])
    for _ in range(GENERATION_ROUNDS):  # a whole generation more without asking: gone
        work.next_round()
    assert all(kept[0] is not small for kept in work._memo._this.values())
    assert all(kept[0] is not small for kept in work._memo._last.values())


def test_running_seconds_as_arrays_equal_work_left_to_the_bit() -> None:
    """The critical path reads the running side as arrays: each entry is
    ``WorkLeft.seconds(job, now, True)`` to the bit, for jobs mid-run (progress counted),
    admitted (no run yet: the waiting figure), unpriced (inf) and replaced by a new object."""
    catalog = _catalog()
    work = WorkLeft(catalog)
    sides = RunningSeconds(work)
    placement = ((0, 0), (0, 1))
    mid_run = running_job(
        JobSpec("r", "resnet18_32", 2, 90_000), placement, full_backprop(2, 2), NOW - 1_234.5
    )
    mid_run = replace(mid_run, iterations_done=17.25)
    near_end = running_job(
        JobSpec("e", "resnet50_32", 1, 300), ((1, 0),), full_backprop(1, 1), NOW - 86_400.0
    )
    admitted = replace(mid_run, id="a", run_started_at=None)
    unknown = running_job(
        JobSpec("u", "no-such-model", 1, 10), ((2, 0),), full_backprop(1, 1), NOW - 5.0
    )
    jobs = [mid_run, near_end, admitted, unknown]
    for now in (NOW, NOW + 0.1, NOW + 3_600.0):
        work.next_round()
        seconds, gpus = sides.of(jobs, now)
        expected = [work.seconds(job, now, True) for job in jobs]
        assert seconds.tolist() == expected and gpus.tolist() == [2, 1, 2, 1]
    assert expected[1] == remaining_seconds(catalog, near_end, NOW + 3_600.0, True)
    assert math.isinf(expected[3]) and expected[0] != expected[2]
    moved = replace(mid_run, iterations_done=40_000.0)  # a new object: read afresh
    seconds, _ = sides.of([moved, near_end], NOW)
    assert seconds.tolist() == [work.seconds(moved, NOW, True), work.seconds(near_end, NOW, True)]
    assert sides.of([], NOW)[0].tolist() == []


def test_running_seconds_keep_their_rows_as_the_running_side_grows_and_shrinks() -> None:
    """More jobs than the table's first rows, then a side without most of them, then some
    back as new objects: every answer is still ``WorkLeft.seconds``, row for row."""
    work = WorkLeft(_catalog())
    sides = RunningSeconds(work)
    base = running_job(
        JobSpec("r", "resnet18_32", 1, 90_000), ((0, 0),), full_backprop(1, 1), NOW - 600.0
    )
    many = [replace(base, id=f"r{i}", iterations_done=float(i)) for i in range(150)]
    sides_seen = [many, many[::3], [*many[100:], *many[:20]], [replace(j) for j in many[:70]]]
    for jobs in sides_seen:
        work.next_round()
        seconds, gpus = sides.of(jobs, NOW)
        assert seconds.tolist() == [work.seconds(job, NOW, True) for job in jobs]
        assert gpus.tolist() == [1] * len(jobs)
