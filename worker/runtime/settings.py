"""Runtime settings, read by pydantic-settings from the ``JIGSAW_*`` environment the service uses.

The variables the service reads too (``JIGSAW_DATA_DIR``, ``JIGSAW_GPUS``, ``JIGSAW_GPU_TYPE``,
``JIGSAW_LEASE_ITERATIONS``) take their meaning, default and range from
:mod:`jigsaw.model.environment`; the rest are runtime knobs with defaults that suit both a laptop
and
a cluster. A rejected value raises :class:`~jigsaw.model.environment.InvalidSettingError` naming the
variable, what is wrong and what it accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from jigsaw.model.environment import (
    ENV_PREFIX,
    GPUS_DEFAULT,
    GPUS_MAX,
    INTERFERENCE_MAX,
    LEASE_ITERATIONS_DEFAULT,
    SHARING_DEFAULT,
    WORKER_MEMORY_GIB_MAX,
    default_checkpoint_dir,
    default_data_dir,
    expand_user,
    rejected,
)
from jigsaw.model.hardware import DEFAULT_GPU_TYPE


class RuntimeSettings(BaseSettings):
    """Every field is ``JIGSAW_<NAME>``; constructing one reads the process environment, and
    keyword arguments override it. :meth:`from_env` reads a given mapping instead."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="ignore", frozen=True
    )

    ray_address: str | None = None
    """``JIGSAW_RAY_ADDRESS``: join this Ray cluster (``host:port`` or ``auto``); unset starts
    a local Ray with ``local_cpus`` CPUs and ``gpus`` logical GPUs."""
    data_dir: Path = Field(default_factory=default_data_dir)
    """``JIGSAW_DATA_DIR``: the service's data directory; checkpoints go under it by default."""
    checkpoint_dir: Path = Field(
        default_factory=lambda values: default_checkpoint_dir(
            values.get("data_dir") or default_data_dir()
        )
    )
    """``JIGSAW_CHECKPOINT_DIR``: a local directory embedded; a shared path (NFS, a mounted
    bucket) on a multi-node cluster, because a resumed gang may land on other nodes."""
    lease_iterations: int = Field(default=LEASE_ITERATIONS_DEFAULT, gt=0)
    """``JIGSAW_LEASE_ITERATIONS``: iterations per lease; progress is reported per lease."""
    control_every: int = Field(default=25, gt=0)
    """Ranks agree on stop requests and new plan versions every this many iterations (and at
    the first iteration of each lease): the bound on preemption and re-plan latency."""
    checkpoint_every_leases: int = Field(default=1, gt=0)
    """Checkpoint after every this many leases (a worker's death loses at most that much)."""
    checkpoints_kept: int = Field(default=2, gt=0)
    local_cpus: int | None = Field(default=None, gt=0)
    gpus: int = Field(default=GPUS_DEFAULT, ge=1, le=GPUS_MAX)
    """``JIGSAW_GPUS``: logical GPUs of the local Ray (allowed on machines without GPUs); not
    read when joining a cluster (``ray_address``). The same variable sizes the simulated
    cluster of the service."""
    cpus_per_worker: float = Field(default=0.0, ge=0)
    """CPU reserved per worker bundle. 0 lets CPU-only test boxes pack many workers."""
    gpu_per_worker: float = Field(default=0.25, gt=0, le=1)
    """GPU fraction reserved per worker: at most ``1 / gpu_per_worker`` workers share one GPU.
    The scheduler decides which workers share; Ray only enforces capacity per node."""
    threads_per_worker: int = Field(default=1, gt=0)
    device: str = "auto"
    """``auto``: CUDA when the actor sees a GPU, else CPU (gloo)."""
    gpu_type: str = DEFAULT_GPU_TYPE
    """Reported for nodes whose Ray resources name no ``accelerator_type``."""
    sharing: Literal["timeslice", "concurrent"] = SHARING_DEFAULT
    """``JIGSAW_SHARING``: how the hardware shares a GPU (jigsaw.model.environment)."""
    interference: float = Field(default=0.0, ge=0, le=INTERFERENCE_MAX, allow_inf_nan=False)
    """``JIGSAW_INTERFERENCE``: penalty on shared rates, 0 to 0.9 (jigsaw.model.environment)."""
    startup_timeout_s: float = Field(default=180.0, gt=0)
    """Reserve + launch + rendezvous + restore must finish within this or the start fails."""
    resize_placement_timeout_s: float = Field(default=60.0, gt=0)
    """A resized gang whose placement group is not reserved within this goes back to the
    job's last size (from the resize's checkpoint) instead of failing."""
    heartbeat_interval_s: float = Field(default=2.0, gt=0)
    hang_timeout_s: float = Field(default=60.0, gt=0)
    """A rank that completes no iteration for this long is hung: the gang is killed."""
    checkpoint_timeout_s: float = Field(default=120.0, gt=0)
    worker_memory_gib: float | None = Field(
        default=None, gt=0, le=WORKER_MEMORY_GIB_MAX, allow_inf_nan=False
    )
    """``JIGSAW_WORKER_MEMORY_GIB``: the most one worker may hold (parameters, gradients,
    optimizer state, activations), checked from the model's size before the first step and
    from the engine's measurement after it; a worker over it fails its job without retry.
    Unset: no limit (on a GPU the device's own memory is the limit)."""
    eval_samples: int | None = Field(default=None, gt=0)
    """Held-out samples scored at the end of a job (all by default)."""
    ray_temp_dir: str | None = None
    pythonpath: str | None = None
    """Put on the actors' PYTHONPATH (the repository when it is not pip-installed)."""

    def __init__(self, **values: Any) -> None:
        unknown = sorted(set(values) - set(type(self).model_fields))
        if unknown:
            raise TypeError(f"RuntimeSettings has no setting {', '.join(unknown)}")
        try:
            super().__init__(**values)
        except ValidationError as error:
            raise rejected(error.errors()) from None

    @field_validator("data_dir", "checkpoint_dir", mode="before")
    @classmethod
    def _expand_home(cls, value: object) -> object:
        return expand_user(value)

    @property
    def local_gpus(self) -> int:
        """Logical GPUs of the local Ray this runtime starts when it joins no cluster."""
        return self.gpus

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> RuntimeSettings:
        """Read the process environment, or ``env`` alone when given (``overrides`` win)."""
        if env is None:
            return cls(**overrides)
        found = _MappingSource(cls, env)()
        try:
            return cls.model_validate({**found, **overrides})
        except ValidationError as error:
            raise rejected(error.errors()) from None


class _MappingSource(EnvSettingsSource):
    """pydantic-settings' environment source, reading a given mapping instead of
    ``os.environ`` (same prefix, same parsing, empty values unset)."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]) -> None:
        self._given = env
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {key.lower(): value for key, value in self._given.items() if value != ""}
