"""Checkpoint a hybrid (SplitBrain-style) plan at an iteration boundary::

    <dir>/replicated.pt  rank 0: the data-parallel blocks (weights + BatchNorm buffers), their
                         momentum buffers, the optimizer's hyper-parameters, iteration,
                         sampler position (identical on every worker, so one copy)
    <dir>/shard<r>.pt    every rank: its shard of the sharded blocks (the split weights and
                         whatever else those blocks hold), their momentum buffers, its RNG, and
                         its own BatchNorm statistics of the data-parallel blocks (each worker
                         normalises its own batch shard, so these differ between workers)
    <dir>/meta.json      rank 0, after a barrier: the commit marker (plan, workers, iteration)

A resumed run continues exactly: the optimizer state is split and joined by parameter index
(data-parallel parameters first, as the engine builds its optimizer).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from worker.hybrid.engine import HybridTrainer
from worker.spb.checkpoint import (
    atomic_save,
    capture_rng,
    check_fixed_plan_meta,
    restore_rng,
    write_meta,
)

HYBRID_FORMAT = "hybrid-1"
REPLICATED_FILE = "replicated.pt"


def shard_file(rank: int) -> str:
    return f"shard{rank}.pt"


def _split_optimizer_state(trainer: HybridTrainer) -> tuple[dict[str, Any], dict[int, Any]]:
    state = trainer.optimizer.state_dict()
    replicated = len(trainer.dp_params)
    return (
        {
            "param_groups": state["param_groups"],
            "state": {i: s for i, s in state["state"].items() if i < replicated},
        },
        {i: s for i, s in state["state"].items() if i >= replicated},
    )


def save_hybrid(trainer: HybridTrainer, directory: str | Path) -> None:
    """Collective: every worker calls it at the same iteration."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    replicated_optimizer, shard_optimizer = _split_optimizer_state(trainer)
    if trainer.rank == 0:
        atomic_save(
            {
                "format": HYBRID_FORMAT,
                "iteration": trainer.iteration,
                "blocks": trainer.dp_blocks.state_dict(),
                "optimizer": replicated_optimizer,
                "sampler": trainer.sampler.state_dict(),
            },
            path / REPLICATED_FILE,
        )
    atomic_save(
        {
            "rank": trainer.rank,
            "blocks": trainer.sharded_blocks.state_dict(),
            "optimizer": shard_optimizer,
            "rng": capture_rng(),
            "dp_buffers": {k: v.clone() for k, v in trainer.dp_blocks.named_buffers()},
        },
        path / shard_file(trainer.rank),
    )
    trainer.comm.barrier()
    if trainer.rank == 0:
        write_meta(
            path,
            {
                "kind": HYBRID_FORMAT,
                "model": trainer.config.model,
                "plan": trainer.plan.describe(),
                "workers": trainer.plan.num_workers,
                "iteration": trainer.iteration,
            },
        )
    trainer.comm.barrier()


def load_hybrid(trainer: HybridTrainer, directory: str | Path) -> None:
    """Restore weights, shards, optimizer, sampler, RNG and iteration (any order of ranks)."""
    path = Path(directory)
    check_fixed_plan_meta(
        path,
        kind=HYBRID_FORMAT,
        what="hybrid",
        model=trainer.config.model,
        plan=trainer.plan.describe(),
    )
    # weights_only=False: the files hold RNG state and plain Python objects we wrote.
    shared = torch.load(path / REPLICATED_FILE, map_location="cpu", weights_only=False)
    own = torch.load(path / shard_file(trainer.rank), map_location="cpu", weights_only=False)
    trainer.dp_blocks.load_state_dict(shared["blocks"])
    with torch.no_grad():
        for name, buffer in trainer.dp_blocks.named_buffers():
            buffer.copy_(own["dp_buffers"][name])
    trainer.sharded_blocks.load_state_dict(own["blocks"])
    trainer.optimizer.load_state_dict(
        {
            "param_groups": shared["optimizer"]["param_groups"],
            "state": {**shared["optimizer"]["state"], **own["optimizer"]},
        }
    )
    trainer.sampler.load_state_dict(shared["sampler"])
    trainer.iteration = int(shared["iteration"])
    restore_rng(own["rng"])
