"""What the driver (the executor's gang thread) and a gang's actors exchange.

Plain frozen dataclasses: Ray pickles them, and every rank of a gang receives identical orders,
which is what keeps the ranks in lockstep without extra coordination.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jigsaw.model.block_noise import BlockNoise
from jigsaw.model.plan import Plan, PlanRequest


@dataclass(frozen=True, slots=True)
class GangConfig:
    """Everything a rank needs to build its trainer; identical on every rank of one attempt."""

    job_id: str
    attempt: int
    model: str
    world_size: int
    plan: Plan
    batch_size: int
    """Per worker (pipeline: a replica of S stages takes ``batch_size x S``)."""
    learning_rate: float
    seed: int
    iterations: int
    """The job's iteration target (a lease never runs past it)."""
    checkpoint_root: str
    """The job's checkpoint directory; each checkpoint is a subdirectory ``it-<iteration>``."""
    restore_from: str | None
    device: str = "auto"
    threads: int = 1
    control_every: int = 25
    eval_samples: int | None = None
    checkpoints_kept: int = 2
    plan_request: PlanRequest | None = None
    """Set when the control plane did not know the model's K: resolve this request against
    the model the trainer built (``plan`` is then full backprop over one block)."""
    noise_probe_every: int = 100
    """A full-backprop probe iteration this often measures blocks with one contributor."""
    worker_memory_bytes: int | None = None
    """The per-worker memory limit (:mod:`worker.runtime.memory_limit`); None: no limit."""
    base_global_batch: int | None = None
    """``batch_policy: adaptive``: the global batch ``learning_rate`` was tuned for; at any
    other the rate follows :func:`jigsaw.efficiency.lr_scaling.scaled_learning_rate`. None: kept."""
    optimizer: str = "sgd"
    """The job's optimizer (``sgd`` or ``adamw``); the data-parallel engine builds it, and
    the adaptive batch's learning-rate rule follows it. Pipeline and hybrid gangs train with
    SGD and refuse any other."""


@dataclass(frozen=True, slots=True)
class PlanOffer:
    """A versioned plan. Ranks switch to the newest version that every rank holds, at the
    same iteration boundary (see :mod:`worker.runtime.control`)."""

    version: int
    plan: Plan


@dataclass(frozen=True, slots=True)
class LeaseOrder:
    index: int
    """Lease number within this attempt, from 0."""
    iterations: int
    plan: PlanOffer
    checkpoint_after: bool


@dataclass(frozen=True, slots=True)
class LeaseReport:
    """One rank's account of one lease."""

    job_id: str
    attempt: int
    rank: int
    lease: int
    start_iteration: int
    end_iteration: int
    """Completed iterations after the lease (absolute, survives restarts)."""
    plan_version: int
    plan: Plan
    """The plan the rank ended the lease on, typed as it went out (an SPB plan over the K the
    workers built, a pipeline or a hybrid plan): its ``kind`` and ``describe()`` are the
    lease's plan kind and text."""
    num_blocks: int
    """The model's block count K as built (the control plane learns it from here)."""
    switches: tuple[tuple[int, int], ...]
    """(plan version, iteration) of every plan version this lease installed."""
    stopped: bool
    """The lease ended early because a stop was agreed."""
    losses: tuple[float, ...]
    samples: int
    compute_s: float
    """Forward + backward + optimizer time summed over the lease (no sync, no waiting)."""
    sync_s: float
    iteration_s: float
    """Sum of the engine's per-iteration times (its measured phases)."""
    steps_wall_s: float
    """Wall time spent inside the engine's ``step`` calls (phases plus its bookkeeping)."""
    wall_s: float
    """Wall time of the lease call on the actor, from entry to the report."""
    control_s: float
    """Time spent agreeing on stop requests and plan versions."""
    saved_activation_bytes: int
    peak_memory_bytes: int
    bytes_sent: int
    idle_before_s: float = 0.0
    """Time this rank sat idle between the previous lease's report and this lease's start."""
    checkpoint: str | None = None
    checkpoint_s: float = 0.0
    eval_s: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)
    """Evaluation results (``accuracy`` or ``eval_loss``) when the order asked for them."""
    block_noise: tuple[BlockNoise, ...] = ()
    """Smoothed per-block gradient statistics after the lease (identical on every rank);
    feed them to :class:`jigsaw.efficiency.model.OnlineEta`. Blocks not measured yet are absent."""
    probe_iterations: int = 0
    """Full-backprop probe iterations inside this lease (their cost is in the figures)."""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    rank: int
    iteration: int
    busy: bool
    """Inside a lease (a rank idle between leases is not hung)."""
    seconds_since_progress: float
    pid: int
    node_ip: str
