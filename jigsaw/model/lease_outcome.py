"""What one lease taught the control plane: the typed way back from the workers.

A gang's ranks each report a lease; the executor folds those reports into one
:class:`LeaseOutcome` (``worker.runtime.summary``), which travels to the scheduling cycle in a
``Progressed`` or ``Finished`` event. The cycle and the recorder read its fields; the API shows
:meth:`LeaseOutcome.as_metrics`, the JSON form a job's progress samples have always stored.

The outcome is checked when it is built, which is where a worker's report enters the control
plane: an SPB plan that does not match the reported block count, or a block count below one,
raises :class:`InvalidLeaseOutcomeError`; gradient statistics that are not finite or not
meaningful raise :class:`~jigsaw.model.block_noise.InvalidNoiseStatisticsError`.
:meth:`LeaseOutcome.with_reported_noise` turns that refusal into ``noise_refused`` (the lease's
progress still counts; one bad report never poisons the job's estimate), so everything
downstream holds validated statistics only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from jigsaw.model.block_noise import (
    BlockNoise,
    InvalidNoiseStatisticsError,
    validate_block_noise,
)
from jigsaw.model.errors import JigsawError
from jigsaw.model.parallelism import PlanKind
from jigsaw.model.plan import Plan, SPBPlan


class InvalidLeaseOutcomeError(JigsawError, ValueError):
    """A lease report contradicts itself (its plan is not for the block count it reports)."""


@dataclass(frozen=True, slots=True)
class LeaseTimings:
    """Where one lease's wall time went, in seconds; each is the slowest rank's figure."""

    wall_s: float
    steps_wall_s: float
    """Inside the engine's ``step`` calls."""
    eval_s: float
    control_s: float
    """Agreeing on stop requests and plan versions."""
    checkpoint_s: float
    overhead_s: float
    """Control-plane time: idle before the lease, control points, assembling the report."""
    overhead_fraction: float
    """``overhead_s`` over ``steps_wall_s`` (the worst rank's)."""
    iteration_s: float | None = None
    """Mean time of one iteration on the slowest rank; None for a lease without iterations."""


@dataclass(frozen=True, slots=True)
class RankCosts:
    """One rank's costs in one lease: per-iteration compute and sync time, memory, traffic."""

    compute_s: float
    sync_s: float
    saved_activation_bytes: int
    peak_memory_bytes: int
    bytes_sent: int


@dataclass(frozen=True, slots=True)
class LeaseOutcome:
    """One lease of one gang, as the control plane reads it. Every field is optional: the
    simulator's reports carry gradient statistics only, a worker's lease sets them all
    (``lease`` is its index, and ``as_metrics`` then writes every key)."""

    lease: int | None = None
    attempt: int | None = None
    iterations: int = 0
    """Iterations this lease ran."""
    plan: Plan | None = None
    """The plan in force at the end of the lease, as the workers report it: an SPB plan over
    the K they built, or the pipeline or hybrid plan they run (None: a report that carries
    no plan, such as the simulator's gradient statistics)."""
    plan_version: int | None = None
    num_blocks: int | None = None
    """The model's block count K as the workers built it (how the control plane learns it)."""
    block_noise: tuple[BlockNoise, ...] = ()
    """Validated per-block gradient statistics, sorted by block."""
    noise_refused: str | None = None
    """Why the statistics this lease reported were refused (None: accepted or none sent)."""
    probe_iterations: int = 0
    switches: tuple[tuple[int, int], ...] = ()
    """(plan version, iteration) of every plan version the lease installed."""
    loss: float | None = None
    """Mean over the lease's iterations and all ranks."""
    last_loss: float | None = None
    throughput: float | None = None
    """Samples per second over the whole gang."""
    iterations_per_s: float | None = None
    timings: LeaseTimings | None = None
    ranks: tuple[RankCosts, ...] = ()
    evaluation: Mapping[str, float] = field(default_factory=dict)
    """What the engine's evaluation reported (``accuracy``, ``eval_loss``), when it ran."""
    log_lines: tuple[str, ...] = ()
    """Lines for the job's log."""

    def __post_init__(self) -> None:
        if self.num_blocks is not None and self.num_blocks < 1:
            raise InvalidLeaseOutcomeError(
                f"lease report: num_blocks is {self.num_blocks}, a model has at least one block"
            )
        if isinstance(self.plan, SPBPlan) and self.num_blocks not in (None, self.plan.num_blocks):
            raise InvalidLeaseOutcomeError(
                f"lease report: the plan {self.plan.describe()} is for {self.plan.num_blocks} "
                f"blocks but the workers built {self.num_blocks}"
            )
        if self.block_noise:
            accepted = validate_block_noise(
                self.block_noise, self.num_blocks, origin="lease report"
            )
            object.__setattr__(self, "block_noise", accepted)

    @property
    def plan_kind(self) -> PlanKind | None:
        """``spb``, ``pipeline`` or ``hybrid``: the reported plan's kind."""
        return self.plan.kind if self.plan is not None else None

    def with_reported_noise(self, stats: Sequence[BlockNoise]) -> LeaseOutcome:
        """This outcome with the statistics the workers reported, or, when they are not finite
        or not meaningful, with none and ``noise_refused`` saying what was wrong."""
        try:
            return replace(self, block_noise=tuple(stats), noise_refused=None)
        except InvalidNoiseStatisticsError as error:
            return replace(self, block_noise=(), noise_refused=str(error))

    def as_metrics(self) -> dict[str, Any]:
        """The JSON form: what a job's progress samples store and the API shows (the keys and
        their order are those lease summaries have always had)."""
        metrics: dict[str, Any] = {}
        if self.lease is not None:
            metrics.update(self._lease_metrics())
        elif self.loss is not None:
            metrics["loss"] = self.loss
        if self.lease is None and self.throughput is not None:
            metrics["throughput"] = self.throughput
        if self.lease is None and self.iterations_per_s is not None:
            metrics["iterations_per_s"] = self.iterations_per_s
        if self.block_noise:
            metrics["block_noise"] = [entry.as_dict() for entry in self.block_noise]
        if self.probe_iterations:
            metrics["probe_iterations"] = self.probe_iterations
        if self.switches:
            metrics["plan_switches"] = [list(switch) for switch in self.switches]
            metrics["plan_switched_at"] = self.switches[-1][1]
        metrics.update(self.evaluation)
        if self.log_lines:
            metrics["log_lines"] = list(self.log_lines)
        return metrics

    def _lease_metrics(self) -> dict[str, Any]:
        timings = self.timings or LeaseTimings(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        return {
            "lease": self.lease,
            "attempt": self.attempt,
            "lease_iterations": self.iterations,
            "plan": list(self.plan.depths) if isinstance(self.plan, SPBPlan) else [],
            "plan_kind": self.plan_kind,
            "plan_text": self.plan.describe() if self.plan is not None else "",
            "num_blocks": self.num_blocks,
            "plan_version": self.plan_version,
            "loss": self.loss,
            "last_loss": self.last_loss,
            "throughput": self.throughput,
            "iterations_per_s": self.iterations_per_s,
            "iteration_time_s": timings.iteration_s,
            "per_rank_compute_s": [rank.compute_s for rank in self.ranks],
            "per_rank_sync_s": [rank.sync_s for rank in self.ranks],
            "saved_activation_bytes": [rank.saved_activation_bytes for rank in self.ranks],
            "peak_memory_bytes": [rank.peak_memory_bytes for rank in self.ranks],
            "bytes_sent": [rank.bytes_sent for rank in self.ranks],
            "lease_wall_s": timings.wall_s,
            "steps_wall_s": timings.steps_wall_s,
            "eval_s": timings.eval_s,
            "control_s": timings.control_s,
            "checkpoint_s": timings.checkpoint_s,
            "lease_overhead_s": timings.overhead_s,
            "lease_overhead_fraction": timings.overhead_fraction,
        }
