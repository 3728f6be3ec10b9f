"""The reasons a jigsaw round's decisions give: each change names its gain."""

from __future__ import annotations

from jigsaw.model.cluster import Placement
from jigsaw.model.plan import Plan
from jigsaw.policies.allocator.configurations import GUEST, Column, JobView


def percent(after: float, before: float) -> str:
    """``after`` against ``before`` as a signed percentage ("new" where it had none)."""
    if before <= 0:
        return "new"
    return f"{after / before - 1.0:+.0%}"


def resized(view: JobView, placement: Placement, batch: int, before: float, after: float) -> str:
    """A gang's resize: from and to how many GPUs, its goodput's change and its batch."""
    old, new = len(view.current), len(placement)
    verb = "grew" if new > old else "shrank" if new < old else "moved"
    return f"jigsaw: {verb} {old}→{new}: goodput {percent(after, before)}, batch {batch * new}"


def moved(view: JobView, column: Column, placement: Placement) -> str:
    """A guest moving: to a GPU of its own, or to another slot."""
    gpu = placement[0]
    where = "a GPU of its own" if column.kind != GUEST else f"GPU {gpu[0]}:{gpu[1]}"
    return f"jigsaw: guest of {view.guest_of} moves to {where}"


def label(plan: Plan) -> str:
    """A plan's name in a reason: an SPB plan's stop depths, else its kind."""
    depths = getattr(plan, "depths", None)
    return f"depths {tuple(depths)}" if depths is not None else type(plan).__name__
