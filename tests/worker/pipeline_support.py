"""Single-process references and rank bodies for the pipeline tests (importable by spawn)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from jigsaw.model.parallelism import PipelinePlan
from worker.pipeline import PipelineConfig, PipelineTrainer
from worker.pipeline.checkpoint import load_pipeline, save_pipeline
from worker.spb.collectives import Collectives
from worker.spb.sampler import GlobalBatchSampler
from worker.zoo import load_workload


def reference_weights(config: PipelineConfig, iterations: int, delay: int) -> dict[str, Tensor]:
    """Whole model in one process, torch.optim.SGD, gradient of the global batch (all
    replicas' shards) taken at W(t - delay): delay 1 is the 2BW rule
    W(t+1) = W(t) - lr * grad f(W(t-1)); delay 0 is plain data parallelism / GPipe."""
    workload = load_workload(config.model, seed=config.seed, **dict(config.model_options))
    model = nn.Sequential(*workload.blocks)
    names = [n for n, _ in model.named_parameters()]
    params = list(model.parameters())
    optimizer = torch.optim.SGD(
        params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
    )
    data = workload.make_data().train
    replicas = config.plan.replicas
    samplers = [
        GlobalBatchSampler(len(data), config.batch_size, replicas, config.seed)
        for _ in range(replicas)
    ]
    previous = [p.detach().clone() for p in params]
    for _ in range(iterations):
        parts = [data.fetch(s.next_indices(r)) for r, s in enumerate(samplers)]
        inputs = torch.cat([p[0] for p in parts])
        targets = torch.cat([p[1] for p in parts])
        at = previous if delay == 1 else [p.detach().clone() for p in params]
        leaves = [w.detach().requires_grad_(True) for w in at]
        out = functional_call(model, dict(zip(names, leaves, strict=True)), (inputs,))
        grads = torch.autograd.grad(workload.loss(out, targets), leaves)
        previous = [p.detach().clone() for p in params]
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        optimizer.step()
    return {n: p.detach().clone() for n, p in zip(names, params, strict=True)}


def max_difference(got: dict[str, Tensor], want: dict[str, Tensor]) -> float:
    assert set(got) == set(want), sorted(set(got) ^ set(want))
    return max((got[n] - want[n]).abs().max().item() for n in want)


def train_in_leases(
    rank: int,
    collectives: Collectives,
    config: PipelineConfig,
    leases: list[int],
    checkpoint_after: int | None = None,
    checkpoint_dir: str | None = None,
    resume_from: str | None = None,
) -> dict[str, Any]:
    trainer = PipelineTrainer(config, collectives)
    if resume_from is not None:
        load_pipeline(trainer, resume_from)
    losses: list[float] = []
    metrics = []
    for number, lease in enumerate(leases):
        run = trainer.train(lease)
        losses += run.losses
        metrics.append(run.as_dict())
        if checkpoint_after == number and checkpoint_dir is not None:
            save_pipeline(trainer, checkpoint_dir)
    return {
        "rank": rank,
        "stage": trainer.stage,
        "replica": trainer.replica,
        "weights": trainer.named_weights(),
        "losses": losses,
        "metrics": metrics,
    }


def gloo_body(rank: int, collectives: Collectives, out_dir: str, jobs: list[Any]) -> None:
    """Run several scenarios in one process group; save each rank's results."""
    results = [train_in_leases(rank, collectives, *job) for job in jobs]
    torch.save(results, Path(out_dir) / f"rank{rank}.pt")


def collect_weights(results: list[dict[str, Any]], replica: int = 0) -> dict[str, Tensor]:
    merged: dict[str, Tensor] = {}
    for result in results:
        if result["replica"] == replica:
            merged.update(result["weights"])
    return merged


def mlp_config(plan: PipelinePlan, **changes: Any) -> PipelineConfig:
    base: dict[str, Any] = {
        "model": "mlp",
        "plan": plan,
        "batch_size": 16,
        "lr": 0.1,
        "momentum": 0.9,
        "weight_decay": 1e-4,
        "seed": 5,
    }
    base.update(changes)
    return PipelineConfig(**base)
