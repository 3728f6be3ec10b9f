"""A gang round places its newcomers with :func:`take_compact_placement`, one call where the
placement module takes two (:func:`compact_placement`, then :func:`take`): on any pool
:func:`group_by_node` builds, and on what taking leaves of it, the two choose the same GPUs
and leave the same pool."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from jigsaw.model.cluster import GpuId
from jigsaw.policies.shared.gang import take_compact_placement
from jigsaw.policies.shared.placement import compact_placement, group_by_node, take

_FREE = st.sets(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=40)
_GANGS = st.lists(st.sampled_from([1, 1, 1, 2, 3, 4, 5, 8, 9, 12, 16, 40]), max_size=12)


@settings(max_examples=300, deadline=None)
@given(free=_FREE, gangs=_GANGS)
def test_one_call_places_and_takes_as_the_two_do(free: set[GpuId], gangs: list[int]) -> None:
    reference = group_by_node(sorted(free))
    pool = copy.deepcopy(dict(reference))
    for workers in gangs:
        expected = compact_placement(reference, workers)
        if expected is not None:
            take(reference, expected)
        assert take_compact_placement(pool, workers) == expected
        assert pool == dict(reference)


def test_a_gang_too_big_for_the_free_gpus_is_not_placed_and_takes_nothing() -> None:
    pool = {0: [(0, 1), (0, 2)], 3: [(3, 0)]}
    assert take_compact_placement(pool, 4) is None
    assert pool == {0: [(0, 1), (0, 2)], 3: [(3, 0)]}
