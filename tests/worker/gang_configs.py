"""A gang's configuration for the lease-seam tests: mlp, 8 samples per worker, lr 0.1, seed 3,
100 iterations, checkpoints under ``tmp_path``; any field overridden by keyword."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jigsaw.model.plan import Plan
from worker.runtime.messages import GangConfig


def gang_config(plan: Plan, tmp_path: Path, **changes: Any) -> GangConfig:
    values: dict[str, Any] = {
        "job_id": "j",
        "attempt": 1,
        "model": "mlp",
        "world_size": plan.num_workers,
        "plan": plan,
        "batch_size": 8,
        "learning_rate": 0.1,
        "seed": 3,
        "iterations": 100,
        "checkpoint_root": str(tmp_path),
        "restore_from": None,
        "device": "cpu",
        **changes,
    }
    return GangConfig(**values)
