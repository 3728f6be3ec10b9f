"""Runtime settings, read from the same ``JIGSAW_*`` environment the service uses.

The service's own settings (pydantic-settings in ``api/``) name the shared variables
(``JIGSAW_RAY_ADDRESS``, ``JIGSAW_CHECKPOINT_DIR``, ``JIGSAW_LEASE_ITERATIONS``, ``JIGSAW_GPUS``);
the rest are runtime knobs with defaults that suit both a laptop and a cluster.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from jigsaw.errors import InvalidSpecError

ENV_PREFIX = "JIGSAW_"


def default_data_dir(env: Mapping[str, str]) -> Path:
    if env.get("JIGSAW_DATA_DIR"):
        return Path(env["JIGSAW_DATA_DIR"])
    xdg = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "jigsaw"


@dataclass(frozen=True)
class RuntimeSettings:
    ray_address: str | None = None
    """``JIGSAW_RAY_ADDRESS``: join this Ray cluster (``host:port`` or ``auto``); unset starts
    a local Ray with ``local_cpus`` CPUs and ``local_gpus`` logical GPUs."""
    checkpoint_dir: Path = field(default_factory=lambda: default_data_dir(os.environ) / "ckpt")
    """``JIGSAW_CHECKPOINT_DIR``: a local directory embedded; a shared path (NFS, a mounted
    bucket) on a multi-node cluster, because a resumed gang may land on other nodes."""
    lease_iterations: int = 50
    """``JIGSAW_LEASE_ITERATIONS``: iterations per lease; progress is reported per lease."""
    control_every: int = 25
    """Ranks agree on stop requests and new plan versions every this many iterations (and at
    the first iteration of each lease): the bound on preemption and re-plan latency."""
    checkpoint_every_leases: int = 1
    """Checkpoint after every this many leases (a worker's death loses at most that much)."""
    checkpoints_kept: int = 2
    local_cpus: int | None = None
    local_gpus: int = 4
    """``JIGSAW_GPUS``: logical GPUs of the local Ray (allowed on machines without GPUs)."""
    cpus_per_worker: float = 0.0
    """CPU reserved per worker bundle. 0 lets CPU-only test boxes pack many workers."""
    gpu_per_worker: float = 0.25
    """GPU fraction reserved per worker: at most ``1 / gpu_per_worker`` workers share one GPU.
    The scheduler decides which workers share; Ray only enforces capacity per node."""
    threads_per_worker: int = 1
    device: str = "auto"
    """``auto``: CUDA when the actor sees a GPU, else CPU (gloo)."""
    gpu_type: str = "v100"
    """Reported for nodes whose Ray resources name no ``accelerator_type``."""
    startup_timeout_s: float = 180.0
    """Reserve + launch + rendezvous + restore must finish within this or the start fails."""
    heartbeat_interval_s: float = 2.0
    hang_timeout_s: float = 60.0
    """A rank that completes no iteration for this long is hung: the gang is killed."""
    checkpoint_timeout_s: float = 120.0
    eval_samples: int | None = None
    """Held-out samples scored at the end of a job (all by default)."""
    ray_temp_dir: str | None = None
    pythonpath: str | None = None
    """Put on the actors' PYTHONPATH (the repository when it is not pip-installed)."""

    def __post_init__(self) -> None:
        positive = {
            "lease_iterations": self.lease_iterations,
            "control_every": self.control_every,
            "checkpoint_every_leases": self.checkpoint_every_leases,
            "checkpoints_kept": self.checkpoints_kept,
            "threads_per_worker": self.threads_per_worker,
            "heartbeat_interval_s": self.heartbeat_interval_s,
            "hang_timeout_s": self.hang_timeout_s,
        }
        for name, value in positive.items():
            if value <= 0:
                raise InvalidSpecError(
                    f"{ENV_PREFIX}{name.upper()} must be positive, got {value}", field=name
                )
        if not 0.0 < self.gpu_per_worker <= 1.0:
            raise InvalidSpecError(
                f"{ENV_PREFIX}GPU_PER_WORKER must be in (0, 1], got {self.gpu_per_worker}",
                field="gpu_per_worker",
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> RuntimeSettings:
        """Read ``JIGSAW_<FIELD>`` for every field (``JIGSAW_GPUS`` for ``local_gpus``)."""
        source = os.environ if env is None else env
        values: dict[str, object] = {}
        aliases = {"local_gpus": "GPUS"}
        for spec in fields(cls):
            key = ENV_PREFIX + aliases.get(spec.name, spec.name.upper())
            raw = source.get(key)
            if raw is None or raw == "":
                continue
            values[spec.name] = _parse(spec.name, key, raw, spec.type)
        if "checkpoint_dir" not in values:
            values["checkpoint_dir"] = default_data_dir(source) / "ckpt"
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]


def _parse(name: str, key: str, raw: str, kind: object) -> object:
    text = str(kind)
    try:
        if "Path" in text:
            return Path(raw).expanduser()
        if text.startswith("int"):
            return int(raw)
        if text.startswith("float"):
            return float(raw)
    except ValueError:
        raise InvalidSpecError(f"{key} must be a number, got {raw!r}", field=name) from None
    return raw
