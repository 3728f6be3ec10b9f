"""Who reduces and who delivers each block's gradient under an SPB plan.

Ranks sorted by depth (ties by rank) make every contributor set ``C_b = {r : d_r < b}`` a
prefix of that order, so the distinct contributor sets are the prefixes ending at each distinct
depth: at most one communication group per distinct depth. Block ``b``'s gradient is summed
among ``C_b`` only (never with zeros from ranks that computed nothing), divided by ``|C_b|``,
and then sent by one contributor, the *root*, to the ranks outside ``C_b``.

The root is the contributor with the deepest stop depth (the last rank of the prefix): it has
the least backward work of all contributors, so the delivery traffic lands where there is slack.
"""

from __future__ import annotations

from dataclasses import dataclass

from jigsaw.model.plan import SPBPlan


@dataclass(frozen=True, slots=True)
class BlockRoute:
    """How block ``block`` (1-based) gets its averaged gradient to every rank."""

    block: int
    contributors: tuple[int, ...]
    root: int
    receivers: tuple[int, ...]

    @property
    def needs_reduce(self) -> bool:
        return len(self.contributors) > 1


@dataclass(frozen=True, slots=True)
class CommSchedule:
    plan: SPBPlan
    routes: tuple[BlockRoute, ...]

    @classmethod
    def from_plan(cls, plan: SPBPlan) -> CommSchedule:
        order = plan.rank_order()
        routes = []
        for block in range(1, plan.num_blocks + 1):
            prefix = tuple(r for r in order if plan.depths[r] < block)
            outside = tuple(sorted(r for r in order if plan.depths[r] >= block))
            routes.append(BlockRoute(block, prefix, prefix[-1], outside))
        return cls(plan, tuple(routes))

    def route(self, block: int) -> BlockRoute:
        return self.routes[block - 1]

    def reduce_groups(self) -> tuple[tuple[int, ...], ...]:
        """Distinct contributor sets with two or more ranks, in a deterministic order.

        Group creation is collective, so every rank must create these in the same order; the
        order depends only on the plan, which every rank holds identically.
        """
        seen: dict[tuple[int, ...], None] = {}
        for route in self.routes:
            if route.needs_reduce:
                seen.setdefault(route.contributors, None)
        return tuple(seen)

    def contributed_blocks(self, rank: int) -> tuple[int, ...]:
        """Blocks this rank backpropagates through, output side first (launch order)."""
        return tuple(r.block for r in reversed(self.routes) if rank in r.contributors)

    def received_blocks(self, rank: int) -> tuple[int, ...]:
        """Blocks whose averaged gradient this rank receives, output side first."""
        return tuple(r.block for r in reversed(self.routes) if rank in r.receivers)
