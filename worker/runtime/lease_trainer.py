"""The seam between the gang actor and a training engine: what a lease needs from any plan type.

The actor (:mod:`worker.runtime.gang_worker`) drives one :class:`LeaseTrainer` per rank; it
never touches an engine directly. Three adapters implement it, chosen by the plan's kind:

- ``spb``      :mod:`worker.runtime.spb_lease` over :class:`~worker.spb.SPBTrainer`
               (data parallel, with or without SPB; plans switch in place);
- ``pipeline`` :mod:`worker.runtime.pipeline_lease` over the PipeDream-2BW engine;
- ``hybrid``   :mod:`worker.runtime.hybrid_lease` over the SplitBrain-style engine.

Pipeline and hybrid gangs refuse an in-place plan change (:class:`PlanChangeRefused`): their
workers hold different parts of the model, so a new layout needs a checkpoint and a restart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from jigsaw.model.block_noise import BlockNoise
from jigsaw.model.errors import JigsawError
from jigsaw.model.plan import Plan

OnIteration = Callable[[int], None]
"""Called with the completed iteration count whenever the engine has made progress."""


class PlanChangeRefused(JigsawError):
    """A pipeline or hybrid gang was asked to change its plan in place."""


class FixedPlanLease:
    """What the pipeline and hybrid leases share: an engine (``trainer``, with ``iteration``
    and ``plan``) whose plan is fixed for the gang's life, so an in-place change is refused
    and the plan it reports is the one it was built with."""

    trainer: Any

    @property
    def iteration(self) -> int:
        return int(self.trainer.iteration)

    def current_plan(self) -> Plan:
        plan: Plan = self.trainer.plan
        return plan

    def describe_plan(self) -> str:
        return str(self.trainer.plan.describe())

    def switch_plan(self, plan: Plan) -> None:
        raise PlanChangeRefused(
            f"a gang running {self.describe_plan()} cannot change its plan in place (asked "
            f"for {plan.describe()}): the scheduler must stop it with a checkpoint and "
            "restart it"
        )

    def noise_stats(self) -> tuple[BlockNoise, ...]:
        return ()  # no SPB contributors, so no per-block gradient noise to report

    def close(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What one :meth:`LeaseTrainer.run` call measured on this rank."""

    iterations: int
    losses: tuple[float, ...]
    """Per-iteration training loss this rank saw (empty on pipeline stages but the last)."""
    samples: int
    """Samples this rank's share of the job processed."""
    compute_s: float
    sync_s: float
    iteration_s: float
    saved_activation_bytes: int
    peak_memory_bytes: int
    """Parameters (every live version) + gradients + optimizer state + saved activations."""
    bytes_sent: int
    probes: int = 0


class LeaseTrainer(Protocol):
    """One rank's engine, as a lease sees it. Collective methods are called by every rank at
    the same iteration (the actor's lockstep guarantees it)."""

    kind: str
    num_blocks: int
    device: torch.device

    @property
    def iteration(self) -> int: ...

    def current_plan(self) -> Plan:
        """The plan in force, over the K the workers built: what a lease report carries back."""
        ...

    def describe_plan(self) -> str: ...

    def switch_plan(self, plan: Plan) -> None:
        """Install ``plan`` now (collective). Raises :class:`PlanChangeRefused` unless SPB."""
        ...

    def run(self, iterations: int, on_iteration: OnIteration) -> RunOutcome:
        """Train ``iterations`` iterations (collective); a pipeline drains at the end."""
        ...

    def static_memory_bytes(self) -> int:
        """Bytes this rank will hold before any activation: parameters (every weight version
        it keeps), gradients and optimizer state, from the model's size."""
        ...

    def save_checkpoint(self, directory: Path) -> None: ...

    def load_checkpoint(self, directory: Path) -> None: ...

    def evaluate(self, max_samples: int | None) -> float | None:
        """Collective: the held-out metric on rank 0 (``None`` on other ranks)."""
        ...

    @property
    def metric(self) -> str:
        """``accuracy`` or ``eval_loss``."""
        ...

    def noise_stats(self) -> tuple[BlockNoise, ...]: ...

    def close(self) -> None: ...
