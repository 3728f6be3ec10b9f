"""Reusable multi-rank runs that record what happened on each rank.

Tests and benchmarks use these with either backend: ``spawn_local(run_scenario, n, scenario)``
for real torch.distributed processes, or ``run_threads(n, ...)`` for the in-process group. The
functions live in the package (not in tests) so that spawned processes can import them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from jigsaw.model.plan import SPBPlan
from worker.spb.collectives import Collectives
from worker.spb.sampler import GlobalBatchSampler
from worker.spb.trainer import SPBTrainer
from worker.spb.trainer_setup import TrainerConfig, build_optimizer, seed_rngs
from worker.zoo import load_workload


@dataclass(frozen=True)
class Scenario:
    config: TrainerConfig
    steps: int
    out_dir: str
    switches: dict[int, SPBPlan] = field(default_factory=dict)
    checkpoint_at: int | None = None
    checkpoint_dir: str | None = None
    resume_from: str | None = None
    record_states: bool = True
    record_grads: bool = False


def result_path(out_dir: str | Path, rank: int) -> Path:
    return Path(out_dir) / f"rank{rank}.pt"


def run_scenario(rank: int, collectives: Collectives, scenario: Scenario) -> dict[str, Any]:
    """Train ``scenario.steps`` iterations; save per-step losses, full state vectors, applied
    per-block gradients and metrics to ``out_dir/rank<r>.pt``; return the same dict."""
    trainer = SPBTrainer(scenario.config, collectives)
    if scenario.resume_from is not None:
        trainer.load_checkpoint(scenario.resume_from)
    for at, plan in scenario.switches.items():
        if at >= trainer.iteration:
            trainer.schedule_plan(plan, apply_at=at)
    record: dict[str, Any] = {
        "iterations": [],
        "losses": [],
        "states": [],
        "grads": [],
        "depths": [],
        "metrics": [],
    }
    while trainer.iteration < scenario.steps:
        if scenario.checkpoint_at == trainer.iteration and scenario.checkpoint_dir:
            trainer.save_checkpoint(scenario.checkpoint_dir)
        metrics = trainer.step()
        record["iterations"].append(metrics.iteration)
        record["losses"].append(metrics.loss)
        record["depths"].append(metrics.depth)
        record["metrics"].append(metrics.as_dict())
        if scenario.record_states:
            record["states"].append(trainer.state_vector())
        if scenario.record_grads:
            record["grads"].append(
                [
                    torch.cat([_applied_gradient(p) for p in block.parameters()])
                    for block in trainer.blocks
                ]
            )
    trainer.close()
    Path(scenario.out_dir).mkdir(parents=True, exist_ok=True)
    torch.save(record, result_path(scenario.out_dir, rank))
    return record


def _applied_gradient(param: nn.Parameter) -> torch.Tensor:
    if param.grad is None:
        raise RuntimeError("a parameter has no gradient after a step: SPB trains every block")
    return param.grad.reshape(-1).clone()


def run_ddp_reference(rank: int, collectives: Collectives, scenario: Scenario) -> None:
    """Plain torch DDP on the same model, seed, data shards and optimizer: the baseline that
    plan ``none`` must match. Records parameters after each step."""
    config = scenario.config
    workload = load_workload(config.model, seed=config.seed, **dict(config.model_options))
    model = nn.Sequential(*workload.blocks).to(config.device).train()
    ddp = DistributedDataParallel(model)
    optimizer = build_optimizer(config, list(model.parameters()))
    data = workload.make_data()
    sampler = GlobalBatchSampler(
        len(data.train), config.batch_size, collectives.world_size, config.seed
    )
    seed_rngs(config.seed, rank)
    states = []
    for _ in range(scenario.steps):
        inputs, targets = data.train.fetch(sampler.next_indices(rank))
        optimizer.zero_grad(set_to_none=True)
        workload.loss(ddp(inputs), targets).backward()
        optimizer.step()
        states.append(torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()]))
    Path(scenario.out_dir).mkdir(parents=True, exist_ok=True)
    torch.save({"states": states}, result_path(scenario.out_dir, rank))


def run_scenarios(
    rank: int, collectives: Collectives, scenarios: list[tuple[str, Scenario]]
) -> None:
    """Several runs back to back in one process group (spawning 4 ranks costs ~10 s): each
    entry is ``("spb", scenario)`` or ``("ddp", scenario)``."""
    for kind, scenario in scenarios:
        if kind == "ddp":
            run_ddp_reference(rank, collectives, scenario)
        else:
            run_scenario(rank, collectives, scenario)


def load_results(out_dir: str | Path, world_size: int) -> list[dict[str, Any]]:
    return [torch.load(result_path(out_dir, r), weights_only=False) for r in range(world_size)]
