"""Held-out evaluation of a hybrid plan: every worker runs the data-parallel blocks on its
equal share of each evaluation batch (the last rows repeated to make the shares equal), the
shares are gathered at the first sharded block as in training, and every worker scores the
replicated output (BatchNorm in eval mode)."""

from __future__ import annotations

import torch

from jigsaw.model.errors import InvalidSpecError
from worker.hybrid.engine import HybridTrainer
from worker.hybrid.sharded_linear import gather_rows

EVAL_BATCH = 256


@torch.no_grad()
def evaluate_hybrid(trainer: HybridTrainer, max_samples: int | None = None) -> float:
    """Collective over every worker; all return the same score (accuracy or mean loss)."""
    held_out = trainer.eval_data
    if held_out is None:
        raise InvalidSpecError(f"{trainer.config.model} has no evaluation split", field="model")
    size = len(held_out) if max_samples is None else min(max_samples, len(held_out))
    group, device = trainer.group, trainer.device
    total, count = 0.0, 0
    trainer.dp_blocks.eval()
    trainer.sharded_blocks.eval()
    try:
        for start in range(0, size, EVAL_BATCH):
            stop = min(start + EVAL_BATCH, size)
            rows = stop - start
            share = -(-rows // group.size)
            mine = torch.arange(group.index * share, (group.index + 1) * share).clamp(max=rows - 1)
            inputs = held_out.fetch(mine + start)[0].to(device)
            hidden = gather_rows(trainer.dp_blocks(inputs), group)
            out = trainer.sharded_blocks(hidden)[:rows]
            targets = held_out.fetch(torch.arange(start, stop))[1].to(device)
            if trainer.workload.metric == "accuracy":
                total += float((out.argmax(dim=-1) == targets).sum())
                count += rows
            else:
                total += float(trainer.workload.loss(out, targets)) * rows
                count += rows
    finally:
        trainer.dp_blocks.train()
        trainer.sharded_blocks.train()
    return total / count
