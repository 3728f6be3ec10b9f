"""SPB plans: one stop depth per data-parallel worker.

A model has ``K`` blocks numbered 1..K from input to output. Worker ``r`` has stop depth
``d_r`` in ``0..K-1`` and backpropagates only through blocks ``d_r+1..K``. Block ``b`` is
trained by its contributors ``C_b = {r : d_r < b}``; a plan is *structured* (valid) when every
block has at least one contributor, which is the same as ``min(d) == 0``.

Plan specs accepted everywhere (API, CLI, YAML, worker):

- ``none``: every worker does full backprop, ``d = (0, ..., 0)``.
- ``staircase``: ``d_r = floor(r * K / N)``; for N = K = 4 that is ``(0, 1, 2, 3)``.
- ``uniform:k``: worker 0 does full backprop, every other worker stops at depth ``k``.
- ``auto``: the scheduler chooses (resolved by the policy, never by the worker).
- an explicit comma-separated list such as ``0,1,1,2`` (or a list of ints in JSON/YAML).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jigsaw.errors import InvalidPlanError

AUTO = "auto"
NAMED_PLANS = ("none", "staircase", "uniform:k", AUTO)


@dataclass(frozen=True, slots=True)
class SPBPlan:
    """Stop depths per worker for a model of ``num_blocks`` blocks. Always valid once built."""

    depths: tuple[int, ...]
    num_blocks: int

    def __post_init__(self) -> None:
        validate_depths(self.depths, self.num_blocks)

    @property
    def num_workers(self) -> int:
        return len(self.depths)

    @property
    def is_full_backprop(self) -> bool:
        return all(d == 0 for d in self.depths)

    def contributors(self, block: int) -> tuple[int, ...]:
        """Ranks whose gradient counts for ``block`` (1-based): ``{r : d_r < block}``."""
        if not 1 <= block <= self.num_blocks:
            raise InvalidPlanError(f"block {block} is outside 1..{self.num_blocks}")
        return tuple(r for r, d in enumerate(self.depths) if d < block)

    def trained_fraction(self, rank: int) -> float:
        """Fraction of blocks this rank backpropagates through (by count, not by cost)."""
        return (self.num_blocks - self.depths[rank]) / self.num_blocks

    def rank_order(self) -> tuple[int, ...]:
        """Ranks sorted by depth, ties by rank: every ``C_b`` is then a prefix of this order."""
        return tuple(sorted(range(self.num_workers), key=lambda r: (self.depths[r], r)))

    def describe(self) -> str:
        return ",".join(str(d) for d in self.depths)


def validate_depths(depths: Sequence[int], num_blocks: int) -> None:
    if num_blocks < 1:
        raise InvalidPlanError(f"a model needs at least one block, got {num_blocks}")
    if not depths:
        raise InvalidPlanError("a plan needs at least one worker")
    for rank, depth in enumerate(depths):
        if not isinstance(depth, int) or isinstance(depth, bool):
            raise InvalidPlanError(f"depth of worker {rank} must be an integer, got {depth!r}")
        if not 0 <= depth < num_blocks:
            raise InvalidPlanError(
                f"depth {depth} of worker {rank} is outside the model: "
                f"depths must be in 0..{num_blocks - 1} for a {num_blocks}-block model"
            )
    if min(depths) != 0:
        raise InvalidPlanError(
            f"plan {list(depths)} leaves block 1 untrained: at least one worker needs depth 0"
        )


def staircase(num_workers: int, num_blocks: int) -> SPBPlan:
    return SPBPlan(tuple((r * num_blocks) // num_workers for r in range(num_workers)), num_blocks)


def uniform(num_workers: int, num_blocks: int, depth: int) -> SPBPlan:
    return SPBPlan((0,) + (depth,) * (num_workers - 1), num_blocks)


def full_backprop(num_workers: int, num_blocks: int) -> SPBPlan:
    return SPBPlan((0,) * num_workers, num_blocks)


def check_plan_spec(spec: str | Sequence[int], num_workers: int | None = None) -> None:
    """Check everything that can be checked without knowing the model (used at submit time):
    syntax, one depth per worker, no negative depth, and some worker at depth 0. Depths beyond
    the model's last block are caught later by :func:`resolve_plan`, once K is known."""
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text in ("none", "staircase", AUTO):
            return
        if text.startswith("uniform:"):
            _parse_uniform_depth(text)
            return
        depths: Sequence[int] = _parse_depth_list(text)
    else:
        depths = spec
    for depth in depths:
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
            raise InvalidPlanError(f"explicit depths must be non-negative integers, got {depth!r}")
    if num_workers is not None and len(depths) != num_workers:
        raise InvalidPlanError(
            f"plan lists {len(depths)} depths but the job has {num_workers} workers"
        )
    if not depths or min(depths) != 0:
        raise InvalidPlanError(
            f"plan {list(depths)} leaves block 1 untrained: at least one worker needs depth 0"
        )


def resolve_plan(spec: str | Sequence[int], num_workers: int, num_blocks: int) -> SPBPlan:
    """Turn a plan spec into concrete depths. ``auto`` resolves to full backprop here;
    SPB-aware policies resolve ``auto`` themselves before calling this."""
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text in ("none", AUTO):
            return full_backprop(num_workers, num_blocks)
        if text == "staircase":
            return staircase(num_workers, num_blocks)
        if text.startswith("uniform:"):
            return uniform(num_workers, num_blocks, _parse_uniform_depth(text))
        depths: Sequence[int] = _parse_depth_list(text)
    else:
        depths = list(spec)
    if len(depths) != num_workers:
        raise InvalidPlanError(
            f"plan lists {len(depths)} depths but the job has {num_workers} workers"
        )
    return SPBPlan(tuple(depths), num_blocks)


def _parse_uniform_depth(text: str) -> int:
    raw = text.split(":", 1)[1]
    try:
        depth = int(raw)
    except ValueError:
        raise InvalidPlanError(f"'uniform:k' needs an integer k, got {raw!r}") from None
    if depth < 0:
        raise InvalidPlanError(f"'uniform:k' needs k >= 0, got {depth}")
    return depth


def _parse_depth_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.replace(" ", "").split(",") if part != ""]
    except ValueError:
        raise InvalidPlanError(
            f"unknown plan {text!r}: use none, staircase, uniform:k, auto, "
            "or comma-separated depths such as 0,1,2,3"
        ) from None
