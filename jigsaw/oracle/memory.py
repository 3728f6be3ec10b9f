"""What one worker holds in memory: the one formula the oracle predicts with and the workers
check the per-worker limit (``JIGSAW_WORKER_MEMORY_GIB``) with.

A worker holds every weight version it keeps (one; two under PipeDream-2BW), one gradient per
parameter, its optimizer's state, the activations it saves for backward, and the framework's
workspace. Every term but the activations and the workspace is a multiple of the bytes of the
parameters the worker holds, so the oracle (from a profile's parameter bytes) and a worker
(from the tensors it built) get the same figure for the same parameters.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WorkerMemory:
    params: int
    gradients: int
    optimizer: int
    activations: int
    workspace: int

    @property
    def model_bytes(self) -> int:
        """Everything but the workspace: what the engines' accounting measures and what the
        per-worker memory limit covers."""
        return self.params + self.gradients + self.optimizer + self.activations

    @property
    def total(self) -> int:
        return self.model_bytes + self.workspace


def optimizer_state_copies(optimizer: str = "sgd", momentum: float = 0.9) -> int:
    """Tensors the size of a parameter that the optimizer keeps for it: AdamW two (first and
    second moments), SGD with momentum one (the velocity), plain SGD none."""
    if optimizer == "adamw":
        return 2
    return 1 if momentum else 0


def worker_memory(
    param_bytes: int,
    activation_bytes: float = 0.0,
    *,
    weight_versions: int = 1,
    optimizer_copies: int = 1,
    workspace_bytes: int = 0,
) -> WorkerMemory:
    """One worker's memory, holding ``param_bytes`` of parameters (its stage or its shard) and
    saving ``activation_bytes`` for backward. The defaults are our engines': one weight
    version, SGD with momentum."""
    return WorkerMemory(
        params=weight_versions * param_bytes,
        gradients=param_bytes,
        optimizer=optimizer_copies * param_bytes,
        activations=round(activation_bytes),
        workspace=workspace_bytes,
    )
