from __future__ import annotations

from jigsaw.model.plan import SPBPlan, resolve_plan
from worker.spb.schedule import CommSchedule


def test_staircase_routes_reduce_among_prefix_and_deliver_from_deepest_contributor() -> None:
    schedule = CommSchedule.from_plan(resolve_plan("staircase", 4, 4))
    routes = {r.block: r for r in schedule.routes}
    assert routes[1].contributors == (0,) and routes[1].root == 0
    assert routes[1].receivers == (1, 2, 3) and not routes[1].needs_reduce
    assert routes[2].contributors == (0, 1) and routes[2].root == 1
    assert routes[3].contributors == (0, 1, 2) and routes[3].receivers == (3,)
    assert routes[4].contributors == (0, 1, 2, 3) and routes[4].receivers == ()
    assert schedule.reduce_groups() == ((0, 1), (0, 1, 2), (0, 1, 2, 3))
    assert schedule.contributed_blocks(2) == (4, 3)
    assert schedule.received_blocks(2) == (2, 1)


def test_contributor_sets_are_prefixes_of_depth_order_even_when_ranks_are_shuffled() -> None:
    plan = SPBPlan((2, 0, 3, 0, 1), 4)
    schedule = CommSchedule.from_plan(plan)
    order = plan.rank_order()
    for route in schedule.routes:
        assert route.contributors == order[: len(route.contributors)]
        assert set(route.contributors) == set(plan.contributors(route.block))
        assert set(route.receivers) | set(route.contributors) == set(range(5))
    # At most one reduction group per distinct depth.
    assert len(schedule.reduce_groups()) <= len(set(plan.depths))


def test_uniform_plan_needs_no_subgroup_beyond_the_world() -> None:
    schedule = CommSchedule.from_plan(resolve_plan("uniform:2", 4, 4))
    assert schedule.reduce_groups() == ((0, 1, 2, 3),)
    assert schedule.route(2).receivers == (1, 2, 3)
