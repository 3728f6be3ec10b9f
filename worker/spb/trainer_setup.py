"""What an SPB trainer is built from: its :class:`TrainerConfig`, the optimizer the config
names (:func:`build_optimizer`), the check that its blocks share no parameter, and the
per-rank seeding of every RNG (used again when a checkpoint has no RNG state for a rank)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import SPBPlan
from worker.spb.noise import DEFAULT_DECAY
from worker.zoo.workload import GLOBAL_RNG_LOCK

SGD_MOMENTUM = 0.9


@dataclass(frozen=True)
class TrainerConfig:
    """Everything a rank needs to build its trainer; identical on every rank of a job."""

    model: str
    plan: SPBPlan
    """For this job's world size and the model's K (:func:`worker.spb.model_plans.model_plan`
    resolves a plan named in words against a zoo model)."""
    batch_size: int = 32  # per rank
    optimizer: Literal["sgd", "adamw"] = "sgd"
    lr: float = 0.05
    momentum: float = SGD_MOMENTUM
    """SGD's only: AdamW refuses any other value (it has betas, not momentum)."""
    weight_decay: float = 0.0
    seed: int = 0
    device: str = "cpu"
    model_options: Mapping[str, Any] = field(default_factory=dict)
    measure_activations: bool = True
    average_buffers: bool = True
    history_limit: int = 10_000
    gradient_noise: bool = True
    """Measure per-block gradient noise at each reduce (``trainer.noise_stats()``)."""
    noise_decay: float = DEFAULT_DECAY
    noise_probe_every: int = 0
    """Every this many iterations, when the plan leaves a block with a single contributor, run
    one iteration as full backprop so that block's noise gets measured too (0: never)."""


def build_optimizer(config: TrainerConfig, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    if config.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
        )
    if config.optimizer == "adamw":
        if config.momentum != SGD_MOMENTUM:
            raise InvalidSpecError(
                f"momentum {config.momentum} is SGD's: AdamW has betas (0.9, 0.999), not "
                "momentum; leave momentum at its default with optimizer adamw",
                field="momentum",
            )
        return torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    raise InvalidSpecError(
        f"unknown optimizer {config.optimizer!r}: use 'sgd' or 'adamw'", field="optimizer"
    )


def check_blocks_disjoint(blocks: list[nn.Module]) -> None:
    """Refuse a model whose blocks share a parameter (SPB gives every parameter one block)."""
    owner: dict[int, int] = {}
    for index, block in enumerate(blocks, start=1):
        for param in block.parameters():
            if id(param) in owner and owner[id(param)] != index:
                raise InvalidSpecError(
                    f"a parameter is shared by blocks {owner[id(param)]} and {index}; SPB needs "
                    "every parameter to belong to exactly one block (untie shared weights)",
                    field="model",
                )
            owner[id(param)] = index


def seed_rngs(seed: int, rank: int) -> None:
    """Seed torch, numpy and ``random`` for ``rank`` of a job seeded ``seed``."""
    per_rank = seed * 7919 + rank
    # Under the zoo's lock: a thread-simulated peer may be drawing initial weights right now.
    with GLOBAL_RNG_LOCK:
        torch.manual_seed(per_rank)
        np.random.seed(per_rank % 2**32)
        random.seed(per_rank)
