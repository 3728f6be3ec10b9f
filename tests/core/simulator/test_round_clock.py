"""The replay's round clock: rounds on the grid, Pollux's interval and Gavel's rounds."""

from __future__ import annotations

from jigsaw.simulator.round_clock import RoundClock


def grid(now: float = 0.0, *, grid_only: bool = False) -> RoundClock:
    return RoundClock.starting_at(now, 60.0, ends_when_idle=False, grid_only=grid_only)


def busy() -> bool:
    return False


def test_rounds_sit_on_multiples_of_the_round_length_despite_round_off() -> None:
    clock = grid()
    assert clock.reached(0.0, busy) and clock.next_round == 60.0
    assert not clock.reached(59.9, busy)
    # 3 * 0.1 * 200 is 60.00000000000001: the same moment as the boundary, not past it.
    assert clock.reached(3 * 0.1 * 200, busy) and clock.next_round == 120.0


def test_a_grid_only_clock_starts_on_the_grid_and_waits_for_the_grid_after_a_gap() -> None:
    clock = grid(10.0, grid_only=True)
    assert clock.next_round == 60.0 and not clock.reached(30.0, busy)
    # Decisions only on the grid: a change at 185 waits for the round at 240.
    assert not clock.reached(185.0, busy) and clock.next_round == 240.0
    assert clock.reached(240.0, busy) and clock.next_round == 300.0


def test_a_free_clock_decides_the_first_moment_after_an_unneeded_round() -> None:
    clock = grid()
    assert clock.reached(0.0, busy)
    assert clock.reached(185.0, busy)  # the round at 60 was not held: decide at once
    assert clock.next_round == 240.0


def test_gavels_round_ends_when_its_last_gang_stops() -> None:
    clock = RoundClock.starting_at(0.0, 360.0, ends_when_idle=True, grid_only=False)
    assert clock.reached(0.0, lambda: False) and clock.next_round == 360.0
    assert not clock.reached(100.0, lambda: False)  # gangs still run: the round goes on
    assert clock.reached(200.0, lambda: True)  # the last one stopped: next round now
    assert clock.next_round == 560.0


def test_quiet_rounds_are_skipped_to_the_first_boundary_after_the_quiet_spell() -> None:
    clock = grid()
    assert clock.reached(0.0, busy)
    assert clock.after_quiet(301.0) == 360.0
    clock.skip_to(250.0)
    assert clock.next_round == 300.0
