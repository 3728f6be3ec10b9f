"""Execution plans: what a job's workers run, from the user's request to the training step.

Two types carry a plan through the system (docs/ARCHITECTURE.md, "A plan's one path"):

- :class:`PlanRequest` is what the user asked for. It is parsed once, when a
  :class:`~jigsaw.model.domain.JobSpec` is built, and knows nothing of the model.
- :data:`Plan` is what a policy resolved that request into for a model of K blocks and N
  workers. It is a tagged union on ``kind``: :class:`SPBPlan` (data parallel, ``"spb"``),
  :class:`~jigsaw.model.parallelism.PipelinePlan` (``"pipeline"``) and
  :class:`~jigsaw.model.parallelism.HybridPlan` (``"hybrid"``). Decisions, jobs, executors, rate
  models, gang requests and the store all carry a ``Plan``.

SPB plans: a model has ``K`` blocks numbered 1..K from input to output. Worker ``r`` has stop
depth ``d_r`` in ``0..K-1`` and backpropagates only through blocks ``d_r+1..K``. Block ``b`` is
trained by its contributors ``C_b = {r : d_r < b}``; a plan is *structured* (valid) when every
block has at least one contributor, which is the same as ``min(d) == 0``.

Plan requests accepted everywhere (API, CLI, YAML):

- ``none``: every worker does full backprop, ``d = (0, ..., 0)``.
- ``staircase``: ``d_r = floor(r * K / N)``; for N = K = 4 that is ``(0, 1, 2, 3)``.
- ``uniform:k``: worker 0 does full backprop, every other worker stops at depth ``k``.
- ``auto``: the scheduler chooses (resolved by the policy, never by the worker).
- an explicit comma-separated list such as ``0,1,1,2`` (or a list of ints in JSON/YAML).

That text grammar is :meth:`PlanRequest.parse`, the only one: case does not matter, spaces may
surround the whole text, the commas and the depth after ``uniform:``, a depth is unsigned and
has at most :data:`MAX_DEPTH_DIGITS` digits.
:data:`PLAN_TEXT_PATTERN` states the same grammar as a JSON Schema pattern (the API's OpenAPI
schema publishes it), with the one rule parse checks apart: a list holds a 0.
``tests/core/domain/test_plan_grammar.py`` holds the two equal over generated texts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, TypeAlias

from jigsaw.model.errors import InvalidPlanError, InvalidSpecError
from jigsaw.model.parallelism import HybridPlan, PipelinePlan, PlanKind, PlanType, ShardedBlock

AUTO = "auto"
NAMED_PLANS = ("none", "staircase", "uniform:k", AUTO)
MAX_DEPTH_DIGITS = 7
"""A depth written as text has at most this many digits (no model has 10^7 blocks)."""
_DEPTH_TEXT = re.compile(rf"-?[0-9]{{1,{MAX_DEPTH_DIGITS}}}")
_BLANKS = " "
"""What parse strips around the text, the commas and a uniform depth; the pattern's ``_BLANK``.
Spaces only: the API refuses control characters (tab, CR, LF) in every text field."""


def _any_case(word: str) -> str:
    return "".join(f"[{c}{c.upper()}]" if c.isalpha() else c for c in word)


_DIGITS = f"[0-9]{{1,{MAX_DEPTH_DIGITS}}}"
_BLANK = " *"
PLAN_TEXT_PATTERN = (
    rf"^{_BLANK}({'|'.join(_any_case(w) for w in ('none', 'staircase', 'auto'))}"
    rf"|{_any_case('uniform')}:{_BLANK}{_DIGITS}"
    rf"|({_DIGITS}{_BLANK},{_BLANK})*0{{1,{MAX_DEPTH_DIGITS}}}({_BLANK},{_BLANK}{_DIGITS})*)"
    rf"{_BLANK}$"
)
""":meth:`PlanRequest.parse`'s text grammar as a JSON Schema pattern, for clients (the API
publishes it in its OpenAPI schema); a list must hold a 0 (block 1 must be trained)."""


@dataclass(frozen=True, slots=True, eq=False)
class SPBPlan:
    """Stop depths per worker for a model of ``num_blocks`` blocks. Always valid once built.

    It reads as its depths (``len``, iteration, ``plan[rank]``). Two plans are equal when
    depths and block count both are; a plan never equals a bare tuple (compare
    ``plan.depths``), so equality stays an equivalence.
    """

    kind: ClassVar[PlanKind] = "spb"

    depths: tuple[int, ...]
    num_blocks: int

    def __post_init__(self) -> None:
        validate_depths(self.depths, self.num_blocks)

    @property
    def num_workers(self) -> int:
        return len(self.depths)

    # A plan reads as its per-worker stop depths: len, iteration and indexing by rank.
    def __len__(self) -> int:
        return len(self.depths)

    def __iter__(self) -> Iterator[int]:
        return iter(self.depths)

    def __getitem__(self, rank: int) -> int:
        return self.depths[rank]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SPBPlan):
            return self.depths == other.depths and self.num_blocks == other.num_blocks
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.depths)

    @property
    def is_full_backprop(self) -> bool:
        # Depths are validated non-negative, so "all zero" is "none non-zero", at C speed:
        # the jigsaw policy asks this of every running gang in every round.
        return not any(self.depths)

    def contributors(self, block: int) -> tuple[int, ...]:
        """Ranks whose gradient counts for ``block`` (1-based): ``{r : d_r < block}``."""
        if not 1 <= block <= self.num_blocks:
            raise InvalidPlanError(f"block {block} is outside 1..{self.num_blocks}")
        return tuple(r for r, d in enumerate(self.depths) if d < block)

    def rank_order(self) -> tuple[int, ...]:
        """Ranks sorted by depth, ties by rank: every ``C_b`` is then a prefix of this order."""
        return tuple(sorted(range(self.num_workers), key=lambda r: (self.depths[r], r)))

    def describe(self) -> str:
        return ",".join(str(d) for d in self.depths)

    def rebased(self, num_blocks: int) -> SPBPlan:
        """The same plan for a model of ``num_blocks`` blocks. Only full backprop means the
        same thing at every K (a job whose model's K was not known yet starts with it)."""
        if num_blocks == self.num_blocks:
            return self
        if not self.is_full_backprop:
            raise InvalidPlanError(
                f"plan {self.describe()} was resolved for {self.num_blocks} blocks; "
                f"the model has {num_blocks}"
            )
        return full_backprop(self.num_workers, num_blocks)


Plan: TypeAlias = SPBPlan | PipelinePlan | HybridPlan
"""A resolved execution plan, a tagged union on ``plan.kind``: ``"spb"`` (data parallel, with
or without SPB), ``"pipeline"`` (PipeDream-2BW or GPipe stages x replicas) or ``"hybrid"``
(SplitBrain-style sharded suffix). Every member has ``num_workers``, ``num_blocks`` and
``describe()``; only an :class:`SPBPlan` has stop depths."""

PLAN_KINDS: dict[PlanKind, type[SPBPlan] | type[PipelinePlan] | type[HybridPlan]] = {
    SPBPlan.kind: SPBPlan,
    PipelinePlan.kind: PipelinePlan,
    HybridPlan.kind: HybridPlan,
}


def plan_type_of(plan: Plan) -> PlanType:
    """The plan type a resolved plan runs: ``data`` for an :class:`SPBPlan` (tag ``spb``)."""
    if isinstance(plan, PipelinePlan):
        return "pipeline"
    if isinstance(plan, HybridPlan):
        return "hybrid"
    return "data"


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """The one stored and wire form of a plan (the store's ``plan`` column, gang requests)."""
    if isinstance(plan, PipelinePlan):
        return {
            "kind": plan.kind,
            "num_blocks": plan.num_blocks,
            "stages": [list(stage) for stage in plan.stages],
            "micro_batches": plan.micro_batches,
            "replicas": plan.replicas,
            "schedule": plan.schedule,
        }
    if isinstance(plan, HybridPlan):
        return {
            "kind": plan.kind,
            "num_blocks": plan.num_blocks,
            "num_workers": plan.num_workers,
            "sharded": [{"block": s.block, "layout": s.layout} for s in plan.sharded],
        }
    return {"kind": plan.kind, "depths": list(plan.depths), "num_blocks": plan.num_blocks}


def plan_from_json(data: Mapping[str, Any]) -> Plan:
    kind = data.get("kind")
    if kind not in PLAN_KINDS:
        raise InvalidPlanError(f"unknown plan kind {kind!r}; known: {', '.join(PLAN_KINDS)}")
    try:
        if kind == PipelinePlan.kind:
            return PipelinePlan(
                num_blocks=int(data["num_blocks"]),
                stages=tuple((int(a), int(b)) for a, b in data["stages"]),
                micro_batches=int(data["micro_batches"]),
                replicas=int(data.get("replicas", 1)),
                schedule=data.get("schedule", "2bw"),
            )
        if kind == HybridPlan.kind:
            return HybridPlan(
                num_blocks=int(data["num_blocks"]),
                num_workers=int(data["num_workers"]),
                sharded=tuple(
                    ShardedBlock(int(item["block"]), item.get("layout", "column"))
                    for item in data["sharded"]
                ),
            )
        return SPBPlan(tuple(int(d) for d in data["depths"]), int(data["num_blocks"]))
    except (KeyError, TypeError, ValueError) as error:
        if isinstance(error, InvalidSpecError):
            raise
        raise InvalidPlanError(f"malformed {kind} plan {dict(data)!r}: {error}") from None


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


class RequestKind(StrEnum):
    NONE = "none"
    STAIRCASE = "staircase"
    UNIFORM = "uniform"
    AUTO = "auto"
    EXPLICIT = "explicit"


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """A user's plan request, parsed once. Checks all that can be checked without the model."""

    kind: RequestKind
    depth: int | None = None
    """``k`` of ``uniform:k``."""
    depths: tuple[int, ...] = ()
    """An explicit plan's depths."""

    @classmethod
    def parse(cls, spec: str | Sequence[int] | PlanRequest) -> PlanRequest:
        if isinstance(spec, PlanRequest):
            return spec
        if isinstance(spec, str):
            text = spec.strip(_BLANKS).lower()
            if text in (RequestKind.NONE, RequestKind.STAIRCASE, RequestKind.AUTO):
                return cls(RequestKind(text))
            if text.startswith("uniform:"):
                return cls(RequestKind.UNIFORM, depth=_parse_uniform_depth(text))
            depths: Sequence[Any] = _parse_depth_list(text)
        else:
            depths = list(spec)
        for depth in depths:
            if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
                raise InvalidPlanError(
                    f"explicit depths must be non-negative integers, got {depth!r}"
                )
        if not depths or min(depths) != 0:
            raise InvalidPlanError(
                f"plan {list(depths)} leaves block 1 untrained: at least one worker needs depth 0"
            )
        return cls(RequestKind.EXPLICIT, depths=tuple(depths))

    @property
    def text(self) -> str:
        """The canonical spelling (what the spec stores and the API shows)."""
        if self.kind is RequestKind.UNIFORM:
            return f"uniform:{self.depth}"
        if self.kind is RequestKind.EXPLICIT:
            return ",".join(str(d) for d in self.depths)
        return self.kind.value

    @property
    def is_auto(self) -> bool:
        return self.kind is RequestKind.AUTO

    def check_workers(self, num_workers: int) -> None:
        if self.kind is RequestKind.EXPLICIT and len(self.depths) != num_workers:
            raise InvalidPlanError(
                f"plan lists {len(self.depths)} depths but the job has {num_workers} workers"
            )

    def check_blocks(self, num_blocks: int) -> None:
        """Refuse a request that cannot resolve for a model of ``num_blocks`` blocks."""
        deepest = self.depth if self.kind is RequestKind.UNIFORM else max(self.depths, default=0)
        if deepest is not None and deepest >= num_blocks:
            raise InvalidPlanError(
                f"depth {deepest} is outside the model: depths must be in "
                f"0..{num_blocks - 1} for a {num_blocks}-block model"
            )

    def resolve(self, num_workers: int, num_blocks: int) -> SPBPlan:
        """Concrete depths. ``auto`` resolves to full backprop here; SPB-aware policies
        resolve ``auto`` themselves before calling this."""
        match self.kind:
            case RequestKind.NONE | RequestKind.AUTO:
                return full_backprop(num_workers, num_blocks)
            case RequestKind.STAIRCASE:
                return staircase(num_workers, num_blocks)
            case RequestKind.UNIFORM:
                assert self.depth is not None
                return uniform(num_workers, num_blocks, self.depth)
        self.check_workers(num_workers)
        return SPBPlan(self.depths, num_blocks)


def resolve_plan(
    spec: str | Sequence[int] | PlanRequest, num_workers: int, num_blocks: int
) -> SPBPlan:
    """Parse and resolve in one step (standalone tools: benchmarks, the engine's own tests)."""
    return PlanRequest.parse(spec).resolve(num_workers, num_blocks)


def _parse_uniform_depth(text: str) -> int:
    raw = text.split(":", 1)[1].strip(_BLANKS)
    if _DEPTH_TEXT.fullmatch(raw) is None:
        raise InvalidPlanError(
            f"'uniform:k' needs an integer k of at most {MAX_DEPTH_DIGITS} digits, got {raw[:20]!r}"
        )
    if raw.startswith("-"):  # "-0" too: a sign is not part of the grammar
        raise InvalidPlanError(f"'uniform:k' needs k >= 0, got {raw}")
    depth = int(raw)
    return depth


def _parse_depth_list(text: str) -> list[int]:
    """Integers of at most :data:`MAX_DEPTH_DIGITS` digits between commas: no empty item
    (``0,,1`` and ``0,1,`` are not plans), no ``_`` or ``+`` that ``int`` would take."""
    parts = [part.strip(_BLANKS) for part in text.split(",")]
    if not all(_DEPTH_TEXT.fullmatch(part) for part in parts):
        raise InvalidPlanError(
            f"unknown plan {text[:60]!r}: use none, staircase, uniform:k, auto, "
            f"or comma-separated depths such as 0,1,2,3 (at most {MAX_DEPTH_DIGITS} digits "
            "each)"
        )
    for part in parts:
        if part.startswith("-"):  # "-0" too: a sign is not part of the grammar
            raise InvalidPlanError(f"explicit depths must be non-negative integers, got {part}")
    return [int(part) for part in parts]
