"""Parallelism plans beyond data parallelism: pipelines (PipeDream-2BW) and hybrids
(SplitBrain-style sharding). Pure data, validated on construction; errors name the field.

Blocks are numbered 1..K from input to output, as in :mod:`jigsaw.model.plan`.

- :class:`PipelinePlan`: the model is cut into ``len(stages)`` contiguous stages; the pipeline
  is replicated ``replicas`` times (data parallel across replicas). Worker ``rank`` runs stage
  ``rank % num_stages`` of replica ``rank // num_stages``, so stages x replicas = workers.
- :class:`HybridPlan`: every worker holds the data-parallel blocks whole and trains them on its
  own shard of the batch; each sharded block has its linear layers split across all workers
  (``column``: output features split; ``row``: input features split).

Both are members of the ``Plan`` union of :mod:`jigsaw.model.plan` (``kind`` ``"pipeline"`` and
``"hybrid"``), beside the data-parallel ``SPBPlan``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, get_args

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.wording import counted

PlanType = Literal["data", "pipeline", "hybrid"]
"""Which kind of parallelism a job runs: the one vocabulary of the plan type (the planner's
answer, the oracle's alternatives, the API's ``plan_types``). A resolved plan's tag
(:data:`PlanKind`) says the same with ``spb`` for ``data``: :func:`plan_type_of`."""
Parallelism = Literal["auto", "data", "pipeline", "hybrid"]
"""What a job spec's ``parallelism`` may say: a :data:`PlanType`, or ``auto`` (the planner
chooses)."""
PARALLELISM_CHOICES: tuple[Parallelism, ...] = get_args(Parallelism)
PlanKind = Literal["spb", "pipeline", "hybrid"]
"""A resolved plan's tag (``plan.kind``, stored and on the wire): ``spb`` is the data-parallel
plan, with or without SPB depths."""
PipelineSchedule = Literal["2bw", "gpipe"]
SCHEDULES: tuple[PipelineSchedule, ...] = ("2bw", "gpipe")
ShardLayout = Literal["column", "row"]
LAYOUTS: tuple[ShardLayout, ...] = ("column", "row")


def _positive_int(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidSpecError(f"{field} must be a positive integer, got {value!r}", field=field)
    return value


@dataclass(frozen=True, slots=True)
class PipelinePlan:
    """``stages[i] = (first, last)``: stage i runs blocks first..last (1-based, inclusive).

    ``schedule`` is ``"2bw"`` (1F1B, no flush, two weight versions, one-step-delayed update) or
    ``"gpipe"`` (all forwards, all backwards, flush, one weight version).
    """

    kind: ClassVar[PlanKind] = "pipeline"

    num_blocks: int
    stages: tuple[tuple[int, int], ...]
    micro_batches: int
    replicas: int = 1
    schedule: PipelineSchedule = "2bw"

    def __post_init__(self) -> None:
        _positive_int(self.num_blocks, "num_blocks")
        _positive_int(self.micro_batches, "micro_batches")
        _positive_int(self.replicas, "replicas")
        if not self.stages:
            raise InvalidSpecError("a pipeline needs at least one stage", field="stages")
        if len(self.stages) > self.num_blocks:
            raise InvalidSpecError(
                f"{len(self.stages)} stages but the model has only {self.num_blocks} blocks: "
                "every stage needs at least one block",
                field="stages",
            )
        expected = 1
        for i, stage in enumerate(self.stages):
            if len(stage) != 2:
                raise InvalidSpecError(
                    f"stage {i} must be a (first, last) block range, got {stage!r}",
                    field="stages",
                )
            first, last = stage
            if first != expected or last < first:
                raise InvalidSpecError(
                    f"stage {i} is blocks {first}..{last}; stages must cover blocks "
                    f"1..{self.num_blocks} in order without gaps (this one should start "
                    f"at block {expected})",
                    field="stages",
                )
            expected = last + 1
        if expected != self.num_blocks + 1:
            raise InvalidSpecError(
                f"stages end at block {expected - 1} but the model has {self.num_blocks} blocks",
                field="stages",
            )
        if self.schedule not in SCHEDULES:
            raise InvalidSpecError(
                f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}",
                field="schedule",
            )
        if self.schedule == "2bw" and self.micro_batches < len(self.stages):
            # 2BW needs m >= stages so that at most two weight versions are ever in flight.
            raise InvalidSpecError(
                f"a 2BW pipeline of {len(self.stages)} stages needs at least "
                f"{len(self.stages)} micro-batches per batch, got {self.micro_batches}",
                field="micro_batches",
            )

    @classmethod
    def even(
        cls,
        num_blocks: int,
        num_stages: int,
        micro_batches: int,
        replicas: int = 1,
        schedule: PipelineSchedule = "2bw",
    ) -> PipelinePlan:
        """Cut K blocks into ``num_stages`` contiguous stages of near-equal block counts."""
        _positive_int(num_stages, "stages")
        _positive_int(num_blocks, "num_blocks")
        if num_stages > num_blocks:
            raise InvalidSpecError(
                f"{num_stages} stages but the model has only {num_blocks} blocks",
                field="stages",
            )
        bounds = [round(i * num_blocks / num_stages) for i in range(num_stages + 1)]
        stages = tuple((bounds[i] + 1, bounds[i + 1]) for i in range(num_stages))
        return cls(num_blocks, stages, micro_batches, replicas, schedule)

    @classmethod
    def for_workers(
        cls,
        num_blocks: int,
        num_workers: int,
        replicas: int,
        micro_batches: int,
        schedule: PipelineSchedule = "2bw",
    ) -> PipelinePlan:
        """The even plan whose stages x replicas equals ``num_workers``."""
        _positive_int(num_workers, "num_workers")
        _positive_int(replicas, "replicas")
        if num_workers % replicas:
            raise InvalidSpecError(
                f"{replicas} replicas do not divide {num_workers} workers", field="replicas"
            )
        return cls.even(num_blocks, num_workers // replicas, micro_batches, replicas, schedule)

    @property
    def num_stages(self) -> int:
        return len(self.stages)

    @property
    def num_workers(self) -> int:
        return self.num_stages * self.replicas

    def stage_of(self, rank: int) -> int:
        return rank % self.num_stages

    def replica_of(self, rank: int) -> int:
        return rank // self.num_stages

    def rank_of(self, stage: int, replica: int) -> int:
        return replica * self.num_stages + stage

    def ranks_of_stage(self, stage: int) -> tuple[int, ...]:
        """The data-parallel group of one stage: its copy in every replica."""
        return tuple(self.rank_of(stage, r) for r in range(self.replicas))

    def blocks_of(self, stage: int) -> range:
        """0-based block indices of a stage (for indexing a list of blocks)."""
        first, last = self.stages[stage]
        return range(first - 1, last)

    def weight_versions(self) -> int:
        return 2 if self.schedule == "2bw" else 1

    def check_workers(self, num_workers: int) -> None:
        """Refuse a plan whose stages x replicas is not the job's worker count."""
        if num_workers % self.replicas:
            raise InvalidSpecError(
                f"{self.replicas} replicas do not divide {num_workers} workers",
                field="replicas",
            )
        if self.num_workers != num_workers:
            raise InvalidSpecError(
                f"{self.num_stages} stages x {self.replicas} replicas = {self.num_workers} "
                f"workers, but the job has {num_workers}",
                field="stages",
            )

    def describe(self) -> str:
        ranges = ",".join(f"{a}-{b}" if a != b else str(a) for a, b in self.stages)
        return (
            f"pipeline[{self.schedule}] stages {ranges} x {counted(self.replicas, 'replica')}, "
            f"{counted(self.micro_batches, 'micro-batch')}"
        )


@dataclass(frozen=True, slots=True)
class ShardedBlock:
    block: int
    """1-based block index."""
    layout: ShardLayout = "column"


@dataclass(frozen=True, slots=True)
class HybridPlan:
    """SplitBrain-style: data-parallel blocks replicated, ``sharded`` blocks model-parallel.

    The sharded blocks must be the output-side suffix of the model (where VGG-style models keep
    their large fully-connected layers): the engine gathers the global batch once at the first
    sharded block and every worker then computes the rest of the model on it.
    """

    kind: ClassVar[PlanKind] = "hybrid"

    num_blocks: int
    num_workers: int
    sharded: tuple[ShardedBlock, ...]

    def __post_init__(self) -> None:
        _positive_int(self.num_blocks, "num_blocks")
        _positive_int(self.num_workers, "num_workers")
        if not self.sharded:
            raise InvalidSpecError(
                "a hybrid plan needs at least one sharded block", field="sharded"
            )
        seen: set[int] = set()
        for item in self.sharded:
            if not isinstance(item, ShardedBlock):
                raise InvalidSpecError(
                    f"sharded entries must be ShardedBlock, got {item!r}", field="sharded"
                )
            if (
                isinstance(item.block, bool)
                or not isinstance(item.block, int)
                or not (1 <= item.block <= self.num_blocks)
            ):
                raise InvalidSpecError(
                    f"sharded block {item.block!r} is not in 1..{self.num_blocks}",
                    field="sharded",
                )
            if item.block in seen:
                raise InvalidSpecError(
                    f"block {item.block} is named twice in sharded", field="sharded"
                )
            if item.layout not in LAYOUTS:
                raise InvalidSpecError(
                    f"block {item.block}: layout must be one of {', '.join(LAYOUTS)}, "
                    f"got {item.layout!r}",
                    field="sharded",
                )
            seen.add(item.block)
        first = min(seen)
        if seen != set(range(first, self.num_blocks + 1)):
            raise InvalidSpecError(
                f"sharded blocks {sorted(seen)} must be the output-side suffix "
                f"{first}..{self.num_blocks} of the model",
                field="sharded",
            )

    @property
    def first_sharded(self) -> int:
        return min(item.block for item in self.sharded)

    @property
    def data_parallel_blocks(self) -> tuple[int, ...]:
        return tuple(range(1, self.first_sharded))

    def layout_of(self, block: int) -> ShardLayout | None:
        for item in self.sharded:
            if item.block == block:
                return item.layout
        return None

    def check_linear_layers(self, linear_layers_per_block: Sequence[int]) -> None:
        """Refuse a sharded block that has no linear layer to split."""
        if len(linear_layers_per_block) != self.num_blocks:
            raise InvalidSpecError(
                f"the model has {len(linear_layers_per_block)} blocks, the plan {self.num_blocks}",
                field="num_blocks",
            )
        for item in self.sharded:
            if linear_layers_per_block[item.block - 1] < 1:
                raise InvalidSpecError(
                    f"sharded block {item.block} has no linear layer to split",
                    field="sharded",
                )

    def check_shardable(self, linear_layers: Sequence[tuple[int, int, int]]) -> None:
        """Refuse a sharded linear layer too narrow to give every worker a slice:
        ``linear_layers`` are the model's ``(block, in_features, out_features)``; a column
        shard splits ``out_features``, a row shard ``in_features``, across all workers. The
        hybrid engine builds its shards by this rule (worker/hybrid/sharded_linear.py), and the
        planner refuses a hybrid plan by it before a job is accepted."""
        for block, in_features, out_features in linear_layers:
            layout = self.layout_of(block)
            if layout is None:
                continue
            what, total = (
                ("out_features", out_features)
                if layout == "column"
                else ("in_features", in_features)
            )
            if total < self.num_workers:
                raise InvalidSpecError(
                    f"block {block}: {what} of {total} cannot be split across "
                    f"{self.num_workers} workers",
                    field="workers",
                )

    @classmethod
    def suffix(
        cls, num_blocks: int, num_workers: int, first_sharded: int, layout: ShardLayout = "column"
    ) -> HybridPlan:
        return cls(
            num_blocks,
            num_workers,
            tuple(ShardedBlock(b, layout) for b in range(first_sharded, num_blocks + 1)),
        )

    def describe(self) -> str:
        shards = ",".join(f"{s.block}:{s.layout}" for s in self.sharded)
        return f"hybrid x {counted(self.num_workers, 'worker')}, sharded blocks {shards}"
