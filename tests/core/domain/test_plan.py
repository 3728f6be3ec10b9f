from __future__ import annotations

import pytest

from jigsaw.model.errors import InvalidPlanError
from jigsaw.model.plan import PlanRequest, SPBPlan, resolve_plan, staircase


def test_staircase_four_by_four() -> None:
    plan = staircase(4, 4)
    assert plan.depths == (0, 1, 2, 3)
    assert plan.contributors(1) == (0,)
    assert plan.contributors(4) == (0, 1, 2, 3)


def test_staircase_more_workers_than_blocks() -> None:
    assert staircase(8, 4).depths == (0, 0, 1, 1, 2, 2, 3, 3)


def test_contributor_sets_are_prefixes_of_rank_order() -> None:
    plan = SPBPlan((2, 0, 3, 1), 4)
    order = plan.rank_order()
    for block in range(1, 5):
        members = plan.contributors(block)
        assert set(order[: len(members)]) == set(members)


@pytest.mark.parametrize(
    "spec,depths",
    [
        ("none", (0, 0, 0)),
        ("auto", (0, 0, 0)),
        ("uniform:2", (0, 2, 2)),
        ("staircase", (0, 1, 2)),
        ("0,2,1", (0, 2, 1)),
        ([0, 1, 1], (0, 1, 1)),
    ],
)
def test_resolve(spec: str | list[int], depths: tuple[int, ...]) -> None:
    assert resolve_plan(spec, 3, 4).depths == depths


@pytest.mark.parametrize(
    "spec,message",
    [
        ("1,1,2", "leaves block 1 untrained"),
        ("0,4,1", "outside the model"),
        ("0,1", "lists 2 depths but the job has 3 workers"),
        ("uniform:x", "needs an integer"),
        ("banana", "unknown plan 'banana'"),
    ],
)
def test_bad_plans_get_clear_errors(spec: str, message: str) -> None:
    with pytest.raises(InvalidPlanError, match=message):
        resolve_plan(spec, 3, 4)


def test_check_plan_spec_accepts_names_and_rejects_garbage() -> None:
    PlanRequest.parse("uniform:1")
    with pytest.raises(InvalidPlanError):
        PlanRequest.parse("stairs")


@pytest.mark.parametrize(
    "spec,workers,message",
    [
        ("1,2", 2, "leaves block 1 untrained"),
        ("0,1,2", 2, "lists 3 depths but the job has 2 workers"),
        ("0,-1", 2, "non-negative"),
    ],
)
def test_job_spec_rejects_explicit_plans_that_cannot_work(
    spec: str, workers: int, message: str
) -> None:
    from jigsaw.model.domain import JobSpec

    with pytest.raises(InvalidPlanError, match=message):
        JobSpec(name="x", model="mlp", workers=workers, iterations=1, spb=spec)
