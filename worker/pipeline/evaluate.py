"""Held-out evaluation through a drained pipeline: replica 0's stages pass evaluation batches
forward point to point (BatchNorm in eval mode, newest weights), the last stage scores them,
and one all-reduce over every rank hands the score to all."""

from __future__ import annotations

import torch

from jigsaw.model.errors import InvalidSpecError
from worker.pipeline.engine import PipelineTrainer

EVAL_BATCH = 256
TAG_EVAL = 2


@torch.no_grad()
def evaluate_pipeline(trainer: PipelineTrainer, max_samples: int | None = None) -> float:
    """Collective over every rank of the pipeline; every rank returns the same score: accuracy,
    or the mean loss when the workload's metric is ``loss``."""
    held_out = trainer.eval_data
    if held_out is None:
        raise InvalidSpecError(f"{trainer.config.model} has no evaluation split", field="model")
    size = len(held_out) if max_samples is None else min(max_samples, len(held_out))
    comm, device = trainer.comm, trainer.device
    score = torch.zeros(2, dtype=torch.float64, device=device)
    if trainer.replica == 0:
        weights = trainer.versions.get(trainer.versions.newest)
        trainer.module.eval()
        try:
            for start in range(0, size, EVAL_BATCH):
                indices = torch.arange(start, min(start + EVAL_BATCH, size))
                if trainer.first:
                    x = held_out.fetch(indices)[0].to(device)
                else:
                    x = torch.empty((len(indices), *trainer.in_shape[1:]), device=device)
                    comm.recv(x, trainer.rank - 1, TAG_EVAL).wait()
                out = trainer._run(weights, x)
                if not trainer.last:
                    comm.send(out.contiguous(), trainer.rank + 1, TAG_EVAL).wait()
                    continue
                targets = held_out.fetch(indices)[1].to(device)
                if trainer.metric == "accuracy":
                    score[0] += float((out.argmax(dim=-1) == targets).sum())
                    score[1] += targets.numel()
                else:
                    score[0] += float(trainer.loss_fn(out, targets)) * len(indices)
                    score[1] += len(indices)
        finally:
            trainer.module.train()
    comm.all_reduce_sum(score, tuple(range(comm.world_size))).wait()
    return float(score[0] / score[1])
