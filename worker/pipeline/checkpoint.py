"""Checkpoint a pipeline at a lease boundary (the pipeline is drained there)::

    <dir>/stage<s>.pt  written by replica 0 of stage s: every live weight version (2BW: the
                       one the next batch runs on and the newest), the momentum buffers, the
                       stage's buffers (BatchNorm statistics), iteration, sampler position
    <dir>/rank<r>.pt   every rank: its RNG states
    <dir>/meta.json    rank 0, after a barrier: the commit marker (plan, iteration)

Replicas of one stage hold identical weights, so one copy per stage is enough.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from worker.pipeline.engine import PipelineTrainer
from worker.spb.checkpoint import (
    atomic_save,
    capture_rng,
    check_fixed_plan_meta,
    rank_file,
    restore_rng,
    write_meta,
)

PIPELINE_FORMAT = "pipeline-1"


def stage_file(stage: int) -> str:
    return f"stage{stage}.pt"


def save_pipeline(trainer: PipelineTrainer, directory: str | Path) -> None:
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    if trainer.replica == 0:
        state: dict[str, Any] = {
            "format": PIPELINE_FORMAT,
            "iteration": trainer.iteration,
            "versions": {
                v: [w.detach().clone() for w in ws] for v, ws in trainer.versions.versions.items()
            },
            "momentum": [b.clone() for b in trainer.optimizer.buffers or []],
            "buffers": {k: v.clone() for k, v in trainer.module.named_buffers()},
            "sampler": trainer.sampler.state_dict(),
            "plan": trainer.plan.describe(),
        }
        atomic_save(state, path / stage_file(trainer.stage))
    atomic_save({"rng": capture_rng()}, path / rank_file(trainer.rank))
    trainer.comm.barrier()
    if trainer.rank == 0:
        write_meta(
            path,
            {
                "kind": PIPELINE_FORMAT,
                "model": trainer.config.model,
                "plan": trainer.plan.describe(),
                "iteration": trainer.iteration,
            },
        )
    trainer.comm.barrier()


def load_pipeline(trainer: PipelineTrainer, directory: str | Path) -> None:
    path = Path(directory)
    check_fixed_plan_meta(
        path,
        kind=PIPELINE_FORMAT,
        what="pipeline",
        model=trainer.config.model,
        plan=trainer.plan.describe(),
    )
    # weights_only=False: the files hold RNG state and plain Python objects we wrote.
    state = torch.load(path / stage_file(trainer.stage), map_location="cpu", weights_only=False)
    device = trainer.device
    versions = {
        int(v): [w.to(device).requires_grad_(True) for w in ws]
        for v, ws in state["versions"].items()
    }
    trainer.versions.versions = versions
    trainer.optimizer.buffers = [b.to(device) for b in state["momentum"]] or None
    with torch.no_grad():
        for name, buffer in trainer.module.named_buffers():
            buffer.copy_(state["buffers"][name])
    trainer.sampler.load_state_dict(state["sampler"])
    trainer.iteration = int(state["iteration"])
    own = path / rank_file(trainer.rank)
    if own.exists():
        restore_rng(torch.load(own, map_location="cpu", weights_only=False)["rng"])
