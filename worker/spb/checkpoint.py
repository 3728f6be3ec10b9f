"""Checkpoint format (one directory per checkpoint)::

    <dir>/shared.pt    written by rank 0: format version, model name, iteration, plan depths,
                       pending plan switches, block state dicts (weights + BN buffers),
                       optimizer state, data-sampler position (epoch, offset, seed)
    <dir>/rank<r>.pt   written by every rank: its RNG states (torch CPU, CUDA if any, numpy,
                       Python ``random``)
    <dir>/meta.json    written last by rank 0, after a barrier: the commit marker. A directory
                       without it is an incomplete checkpoint and is refused.

Weights and optimizer state are identical on all ranks, so only rank 0 writes them. Files are
written to a temporary name and renamed, so a crash never leaves a torn file.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from jigsaw.model.errors import JigsawError

FORMAT_VERSION = 1
SHARED_FILE = "shared.pt"
META_FILE = "meta.json"


class CheckpointError(JigsawError):
    """A checkpoint is missing, incomplete, or belongs to a different model."""


def rank_file(rank: int) -> str:
    return f"rank{rank}.pt"


def capture_rng() -> dict[str, Any]:
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def atomic_save(obj: Any, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def write_meta(directory: Path, meta: dict[str, Any]) -> None:
    tmp = directory / (META_FILE + ".tmp")
    tmp.write_text(json.dumps({"format_version": FORMAT_VERSION, **meta}, indent=2))
    os.replace(tmp, directory / META_FILE)


def check_fixed_plan_meta(directory: Path, *, kind: str, what: str, model: str, plan: str) -> None:
    """Refuse a pipeline or hybrid checkpoint (``kind``; ``what`` names it in errors) unless
    it is complete and holds ``model`` under ``plan``."""
    meta_path = directory / META_FILE
    if not meta_path.exists():
        raise CheckpointError(f"{directory} is not a complete checkpoint (no {META_FILE})")
    meta = json.loads(meta_path.read_text())
    if meta.get("kind") != kind:
        raise CheckpointError(f"{directory} is not a {what} checkpoint (kind {meta.get('kind')!r})")
    if meta.get("plan") != plan or meta.get("model") != model:
        raise CheckpointError(
            f"{directory} holds {meta.get('model')!r} under {meta.get('plan')!r}; this job runs "
            f"{model!r} under {plan!r}"
        )


def read_checkpoint(directory: Path, rank: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Return (shared state, this rank's state or None if the checkpoint has no file for it)."""
    meta_path = directory / META_FILE
    if not meta_path.exists():
        raise CheckpointError(f"{directory} is not a complete checkpoint (no {META_FILE})")
    meta = json.loads(meta_path.read_text())
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{directory} has checkpoint format {meta.get('format_version')}, "
            f"this engine reads format {FORMAT_VERSION}"
        )
    # weights_only=False: the file holds numpy RNG state and plain Python objects we wrote.
    shared = torch.load(directory / SHARED_FILE, map_location="cpu", weights_only=False)
    own_path = directory / rank_file(rank)
    own = (
        torch.load(own_path, map_location="cpu", weights_only=False) if own_path.exists() else None
    )
    return shared, own
