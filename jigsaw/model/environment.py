"""What the service and the Ray runtime read alike from ``JIGSAW_*`` environment variables.

Both read their settings with pydantic-settings: ``api/settings.py`` (the control plane) and
``worker/runtime/settings.py`` (the Ray runtime). This module holds what they share, so the two
cannot disagree: the prefix, the data directory, the default and range of every variable both
read, and one way to say which value was rejected and what is accepted. It imports no
framework (the core's dependency rule); the readers hand it pydantic's error details.

Variables both read:

- ``JIGSAW_DATA_DIR``: the embedded database, and checkpoints unless ``JIGSAW_CHECKPOINT_DIR``
  says otherwise.
- ``JIGSAW_GPUS``: the GPUs of a cluster JigSaw makes up itself: the simulated cluster
  (``JIGSAW_EXECUTOR=simulated``, in nodes of ``JIGSAW_GPUS_PER_NODE``) or the one-node local
  Ray it starts when ``JIGSAW_RAY_ADDRESS`` is unset (logical GPUs, so a machine without GPUs
  may say 4). Not read when joining a Ray cluster: its nodes report their own GPUs.
- ``JIGSAW_GPU_TYPE``: the GPU type where none is reported: the simulated cluster's, Ray nodes
  whose resources name no accelerator type, and the oracle's predictions.
- ``JIGSAW_LEASE_ITERATIONS``: iterations a gang runs between two progress reports.
- ``JIGSAW_WORKER_MEMORY_GIB``: the per-worker memory limit (GiB). The control plane's
  plan-type choice fits plans under it (unset: the GPU type's memory); the Ray runtime holds
  its workers to it (CPUs have no GPU memory of their own).
- ``JIGSAW_SHARING``: how the cluster's hardware shares a GPU between two jobs' workers:
  ``timeslice`` (turns at iteration boundaries, the default) or ``concurrent`` (space sharing,
  CUDA MPS). The control plane prices packing with it (:mod:`jigsaw.oracle.colocation`) and
  its simulated executor applies it; the Ray runtime does not start MPS itself, so say
  ``concurrent`` only where the nodes run the MPS daemon.
- ``JIGSAW_INTERFERENCE``: a penalty on every shared rate, 0 to 0.9 (default 0): a job that
  shares a GPU runs at ``1 - interference`` of what the sharing mode predicts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.numerics import GIB

ENV_PREFIX = "JIGSAW_"

GPUS_DEFAULT = 4
GPUS_MAX = 100_000
LEASE_ITERATIONS_DEFAULT = 50
CHECKPOINT_SUBDIR = "ckpt"
WORKER_MEMORY_GIB_MAX = 1_000_000.0
SharingModeName = Literal["timeslice", "concurrent"]
SHARING_MODES: tuple[SharingModeName, ...] = ("timeslice", "concurrent")
SHARING_DEFAULT: SharingModeName = "timeslice"
INTERFERENCE_MAX = 0.9


def worker_memory_limit_bytes(gib: float | None) -> int | None:
    """``JIGSAW_WORKER_MEMORY_GIB`` in bytes (``None``: unset, the GPU type's memory)."""
    return None if gib is None else round(gib * GIB)


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/jigsaw`` (``~/.local/share/jigsaw``): where ``JIGSAW_DATA_DIR`` points
    when it is unset."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "jigsaw"


def default_checkpoint_dir(data_dir: Path) -> Path:
    return data_dir / CHECKPOINT_SUBDIR


def expand_user(value: object) -> object:
    """``~`` in a path setting means the home directory (shells do not expand it in quotes)."""
    return Path(value).expanduser() if isinstance(value, str | Path) else value


class InvalidSettingError(InvalidSpecError):
    """A ``JIGSAW_*`` value was rejected; the message names the variable and what it accepts."""

    def __init__(self, message: str, *, variable: str | None = None) -> None:
        super().__init__(message, field=variable)
        self.variable = variable


def variable_name(location: Sequence[int | str]) -> str | None:
    """``("round_seconds",)`` -> ``JIGSAW_ROUND_SECONDS``; ``("quotas", "a")`` -> ``…['a']``."""
    if not location:
        return None
    head = str(location[0]).upper()
    name = head if head.startswith(ENV_PREFIX) else ENV_PREFIX + head
    return name + "".join(f"[{part!r}]" for part in location[1:])


def describe_rejection(error: Mapping[str, Any]) -> str:
    """One readable sentence for one pydantic error detail (``type``, ``loc``, ``input``,
    ``ctx``, ``msg``): which variable, what is wrong with its value, what is accepted."""
    kind = str(error.get("type", ""))
    context: Mapping[str, Any] = error.get("ctx") or {}
    variable = variable_name(tuple(error.get("loc") or ()))
    if kind == "value_error":
        reason = str(context.get("error", error.get("msg", "")))
        return f"{variable}: {reason}" if variable else reason
    accepted = _accepted(kind, context) or str(error.get("msg", "is not valid"))
    subject = variable or "a setting"
    if "input" in error and not isinstance(error["input"], Mapping):
        return f"{subject} {accepted}, got {error['input']!r}"
    return f"{subject} {accepted}"


def rejected(errors: Sequence[Mapping[str, Any]]) -> InvalidSettingError:
    """The error for every rejected value at once; ``variable`` names the first."""
    first = variable_name(tuple(errors[0].get("loc") or ())) if errors else None
    if first is not None:
        first = first.split("[", 1)[0]
    message = "; ".join(describe_rejection(error) for error in errors)
    return InvalidSettingError(message, variable=first)


def _accepted(kind: str, context: Mapping[str, Any]) -> str | None:
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "must be a number (an integer)"
    if kind in ("float_parsing", "float_type", "finite_number"):
        return "must be a number"
    if kind in ("bool_parsing", "bool_type"):
        return "must be true or false"
    if kind == "greater_than":
        limit = context.get("gt")
        return "must be positive" if limit == 0 else f"must be greater than {limit}"
    if kind == "greater_than_equal":
        limit = context.get("ge")
        return "must be 0 or more" if limit == 0 else f"must be at least {limit}"
    if kind == "less_than_equal":
        return f"must be at most {context.get('le')}"
    if kind == "less_than":
        return f"must be less than {context.get('lt')}"
    if kind == "literal_error":
        return f"must be {context.get('expected')}"
    if kind in ("dict_type", "mapping_type"):
        return 'must be a JSON object, such as {"name": 8}'
    return None
