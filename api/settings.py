"""Service settings: ``JIGSAW_*`` environment variables, read once by pydantic-settings."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from jigsaw.model.environment import (
    ENV_PREFIX,
    GPUS_DEFAULT,
    GPUS_MAX,
    INTERFERENCE_MAX,
    LEASE_ITERATIONS_DEFAULT,
    SHARING_DEFAULT,
    WORKER_MEMORY_GIB_MAX,
    default_data_dir,
    expand_user,
    rejected,
)
from jigsaw.model.hardware import DEFAULT_GPU_TYPE
from jigsaw.oracle import SharingSettings

MIB = 2**20

# Secrets nobody should run in production; also anything this short is rejected there.
PLACEHOLDER_SECRETS = frozenset(
    {"changeme", "change-me", "changethis", "secret", "password", "admin", "token", "test", "xxx"}
)
MIN_SECRET_LENGTH = 16


def default_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "jigsaw" / "config.toml"


class Settings(BaseSettings):
    """Every field is ``JIGSAW_<NAME>`` in the environment (docs/API.md has the table).

    The variables the Ray runtime reads too (``JIGSAW_DATA_DIR``, ``JIGSAW_GPUS``,
    ``JIGSAW_GPU_TYPE``, ``JIGSAW_LEASE_ITERATIONS``) take their meaning, default and range
    from :mod:`jigsaw.model.environment`. An empty variable counts as unset.
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="ignore")

    environment: Literal["development", "production"] = "development"
    database_url: str | None = None
    """SQLAlchemy URL; default: SQLite at ``DATA_DIR/jigsaw.db`` (the embedded mode)."""
    data_dir: Path = Field(default_factory=default_data_dir)
    config_path: Path = Field(default_factory=default_config_path)
    """Where the embedded server writes the generated admin token (the CLI reads it)."""
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=1, le=65535)

    executor: Literal["simulated", "ray"] = "simulated"
    policy: str = "fifo"
    policy_options: Annotated[dict[str, Any], NoDecode] = Field(default_factory=dict)
    """JSON keyword arguments for the policy, e.g. ``{"min_run_s": 30}`` for las/maxmin."""
    scheduler: Literal["embedded", "off"] = "embedded"
    """``embedded`` runs the scheduler loop inside ``serve``; ``off`` expects a separate
    ``jigsaw-cli scheduler`` process."""
    round_seconds: float = Field(default=1.0, gt=0, le=3600)
    gpus: int = Field(default=GPUS_DEFAULT, ge=1, le=GPUS_MAX)
    """The simulated cluster's GPUs (the Ray runtime reads it for its local Ray)."""
    gpus_per_node: int = Field(default=4, ge=1, le=1024)
    gpu_type: str = DEFAULT_GPU_TYPE
    worker_memory_gib: float | None = Field(
        default=None, gt=0, le=WORKER_MEMORY_GIB_MAX, allow_inf_nan=False
    )
    """Per-worker memory limit in GiB the plan-type choice must fit (``parallelism: auto``
    picks a pipeline or hybrid plan for a model over it); unset: the GPU type's memory."""
    sharing: Literal["timeslice", "concurrent"] = SHARING_DEFAULT
    """``JIGSAW_SHARING``: how the hardware shares a GPU (jigsaw.model.environment)."""
    interference: float = Field(default=0.0, ge=0, le=INTERFERENCE_MAX, allow_inf_nan=False)
    """``JIGSAW_INTERFERENCE``: penalty on shared rates, 0 to 0.9 (jigsaw.model.environment)."""
    checkpoint_sweep_s: float = Field(default=300.0, gt=0)
    """How often the leading scheduler deletes the checkpoints of jobs that ended for good
    (cancelled, failed); successful jobs delete their own at once."""
    lease_iterations: int = Field(default=LEASE_ITERATIONS_DEFAULT, gt=0)
    sim_iterations_per_second: float = Field(default=10.0, gt=0)
    sim_startup_seconds: float = Field(default=0.0, ge=0)
    max_failures: int = Field(default=3, ge=0)
    retry_backoff_s: float = Field(default=5.0, ge=0)

    max_body_bytes: int = Field(default=1 * MIB, ge=1024)
    idempotency_ttl_s: float = Field(default=24 * 3600.0, ge=24 * 3600.0)
    """Idempotency keys are kept at least this long (never less than 24 h)."""
    progress_samples_per_job: int = Field(default=2000, ge=10)
    queue_quotas: Annotated[dict[str, int], NoDecode] = Field(default_factory=dict)
    """JSON ``{"queue": max_gpus}``: GPUs a queue's running jobs may hold together."""
    user_quotas: Annotated[dict[str, int], NoDecode] = Field(default_factory=dict)
    """JSON ``{"user": max_gpus}``: GPUs one user's running jobs may hold together."""
    private_jobs: bool = False
    """Hide other users' job ids, names and users from non-admin tokens in the cluster,
    scheduler and queue views (Slurm's PrivateData); api/privacy.py."""
    admin_token: SecretStr | None = None
    """Bootstrap admin token (registered at start if no admin token exists yet)."""

    @field_validator("data_dir", "config_path", mode="before")
    @classmethod
    def _expand_home(cls, value: object) -> object:
        return expand_user(value)

    @field_validator("policy_options", "queue_quotas", "user_quotas", mode="before")
    @classmethod
    def _json_object(cls, value: object) -> object:
        """The environment gives text: it must be one JSON object."""
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(
                f'not JSON ({error}); give a JSON object such as {{"name": 8}}, got {value!r}'
            ) from None

    @field_validator("queue_quotas", "user_quotas")
    @classmethod
    def _quotas_positive(cls, value: dict[str, int]) -> dict[str, int]:
        for name, gpus in value.items():
            if gpus < 0:
                raise ValueError(f"quota of {name!r} must be >= 0 GPUs, got {gpus}")
        return value

    @model_validator(mode="after")
    def _refuse_placeholder_secrets(self) -> Settings:
        if self.admin_token is None or self.environment == "development":
            return self
        secret = self.admin_token.get_secret_value()
        if secret.lower() in PLACEHOLDER_SECRETS or len(secret) < MIN_SECRET_LENGTH:
            raise ValueError(
                "JIGSAW_ADMIN_TOKEN looks like a placeholder: outside development use a random "
                f"secret of at least {MIN_SECRET_LENGTH} characters "
                '(python -c "import secrets; print(secrets.token_urlsafe(32))")'
            )
        return self

    @property
    def sharing_settings(self) -> SharingSettings:
        """``JIGSAW_SHARING`` and ``JIGSAW_INTERFERENCE`` for the oracle's co-location model."""
        return SharingSettings(self.sharing, self.interference)

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'jigsaw.db'}"

    @property
    def is_sqlite(self) -> bool:
        return self.resolved_database_url.startswith("sqlite")

    @property
    def public_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"


def read_settings(**overrides: object) -> Settings:
    """Settings from the environment (and ``overrides``). A rejected value raises
    :class:`~jigsaw.model.environment.InvalidSettingError`, naming every variable to fix and what
    it accepts."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as error:
        raise rejected(error.errors()) from None
