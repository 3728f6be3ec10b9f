"""A round's paces are computed only where read, once each, and read as a list would be."""

from __future__ import annotations

import pytest

from jigsaw.policies.allocator.paces import Paces


def test_each_pace_is_computed_once_and_only_when_read() -> None:
    asked: list[int] = []

    def pace_of(index: int) -> float:
        asked.append(index)
        return 1.0 / (index + 1)

    paces = Paces(4, pace_of)
    assert len(paces) == 4 and paces and asked == []
    assert paces[2] == pytest.approx(1 / 3)
    assert paces[2] == paces[-2]
    assert asked == [2]
    assert list(paces) == [1.0, 0.5, pytest.approx(1 / 3), 0.25]
    assert paces[1:3] == [0.5, pytest.approx(1 / 3)]
    assert asked == [2, 0, 1, 3]
    with pytest.raises(IndexError):
        paces[4]
    assert not Paces(0, pace_of)
