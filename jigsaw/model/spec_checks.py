"""The checks a :class:`~jigsaw.model.domain.JobSpec` runs on construction: field types, limits,
parallelism, optimizer and elasticity; each failure names the field
(:class:`~jigsaw.model.errors.InvalidSpecError`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.parallelism import PARALLELISM_CHOICES
from jigsaw.model.profiles import ZOO_MODELS


class SpecFields(Protocol):
    """What these checks read of a :class:`~jigsaw.model.domain.JobSpec` (a protocol, so this
    module does not import the one it checks)."""

    @property
    def model(self) -> str: ...
    @property
    def workers(self) -> int: ...
    @property
    def spb(self) -> str: ...
    @property
    def parallelism(self) -> str: ...
    @property
    def optimizer(self) -> str: ...
    @property
    def batch_policy(self) -> str: ...
    @property
    def min_workers(self) -> int | None: ...
    @property
    def max_workers(self) -> int | None: ...
    @property
    def worker_range(self) -> tuple[int, int]: ...
    @property
    def global_batch(self) -> int: ...
    @property
    def batch_range(self) -> tuple[int, int]: ...
    @property
    def is_elastic(self) -> bool: ...


MAX_WORKERS = 1024
MAX_ITERATIONS = 10**9
NAME_MAX_LENGTH = 128

_FIELD_TYPES: dict[str, type] = {
    "name": str,
    "model": str,
    "workers": int,
    "iterations": int,
    "priority": int,
    "spb": str,
    "batch_size": int,
    "learning_rate": float,
    "seed": int,
    "queue": str,
    "user": str,
    "parallelism": str,
    "min_workers": int,
    "max_workers": int,
    "batch_policy": str,
    "min_global_batch": int,
    "max_global_batch": int,
    "optimizer": str,
}
_OPTIONAL_FIELDS = frozenset({"min_workers", "max_workers", "min_global_batch", "max_global_batch"})
"""Fields whose ``None`` means "not given" (elastic jobs only)."""

BATCH_POLICIES = ("fixed", "adaptive")
OPTIMIZERS = ("sgd", "adamw")
"""What a job may train with; the first is the default."""


def default_parallelism(model: str) -> str:
    return "auto" if model in ZOO_MODELS else "data"


def checked_parallelism(spec: SpecFields) -> str:
    """The canonical ``parallelism``; what can be checked without the model's profile."""
    value = spec.parallelism.strip().lower() or default_parallelism(spec.model)
    if value not in PARALLELISM_CHOICES:
        raise InvalidSpecError(
            f"parallelism must be one of {', '.join(PARALLELISM_CHOICES)}, "
            f"got {spec.parallelism[:40]!r}",
            field="parallelism",
        )
    if value in ("pipeline", "hybrid") and spec.spb not in ("auto", "none"):
        raise InvalidSpecError(
            f"spb {spec.spb!r} is a data-parallel plan and cannot apply to parallelism "
            f"{value!r}: set spb to auto or none, or parallelism to data",
            field="spb",
        )
    return value


def check_optimizer(spec: SpecFields) -> None:
    require(
        spec.optimizer in OPTIMIZERS,
        "optimizer",
        f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {spec.optimizer[:40]!r}",
    )
    require(
        spec.optimizer == "sgd" or spec.parallelism not in ("pipeline", "hybrid"),
        "optimizer",
        f"optimizer {spec.optimizer!r} runs data parallel only; the {spec.parallelism} engine "
        "trains with SGD: set parallelism to data (or auto), or optimizer to sgd",
    )


def check_elasticity(spec: SpecFields) -> None:
    """What can be checked of an elastic request without the cluster (its size and quotas
    are checked at submission)."""
    for name in ("min_workers", "max_workers"):
        value = getattr(spec, name)
        require(
            value is None or 1 <= value <= MAX_WORKERS,
            name,
            f"{name} must be in 1..{MAX_WORKERS}",
        )
    low, high = spec.worker_range
    require(
        spec.min_workers is None or spec.max_workers is None or low <= high,
        "min_workers",
        f"min_workers ({low}) is above max_workers ({high})",
    )
    require(
        low <= spec.workers <= high,
        "workers",
        f"workers ({spec.workers}) must lie in min_workers..max_workers ({low}..{high})",
    )
    require(
        spec.batch_policy in BATCH_POLICIES,
        "batch_policy",
        f"batch_policy must be one of {', '.join(BATCH_POLICIES)}, got {spec.batch_policy[:40]!r}",
    )
    if spec.is_elastic:
        require(
            spec.parallelism == "data" or spec.parallelism == "auto",
            "batch_policy" if spec.batch_policy == "adaptive" else "max_workers",
            f"only data-parallel jobs are elastic; parallelism {spec.parallelism!r} keeps its "
            "size and batch: drop min_workers, max_workers and batch_policy, or set "
            "parallelism to data",
        )
    if spec.batch_policy == "fixed":
        for name in ("min_global_batch", "max_global_batch"):
            require(
                getattr(spec, name) is None,
                name,
                f"{name} bounds an adaptive batch; with batch_policy fixed the global batch "
                "stays workers * batch_size",
            )
        uneven = [n for n in range(low, high + 1) if spec.global_batch % n]
        if uneven:
            raise InvalidSpecError(
                f"batch_policy fixed keeps the global batch {spec.global_batch} (workers * "
                f"batch_size) at every size, but it does not split evenly over {uneven[0]} "
                "workers: choose a global batch every size in min_workers..max_workers "
                "divides, or batch_policy adaptive",
                field="batch_size",
            )
        return
    for name in ("min_global_batch", "max_global_batch"):
        value = getattr(spec, name)
        require(
            value is not None and value >= 1,
            name,
            f"batch_policy adaptive needs {name} (a positive global batch)",
        )
    lowest, highest = spec.batch_range
    require(
        lowest <= highest,
        "min_global_batch",
        f"min_global_batch ({lowest}) is above max_global_batch ({highest})",
    )
    check_every_size_has_a_batch(low, high, lowest, highest)
    require(
        lowest <= spec.global_batch <= highest,
        "batch_size",
        f"the initial global batch {spec.global_batch} (workers * batch_size) must lie in "
        f"min_global_batch..max_global_batch ({lowest}..{highest})",
    )


def sizes_without_a_batch(low: int, high: int, lowest: int, highest: int) -> list[int]:
    """The worker counts in ``low..high`` at which no global batch in ``lowest..highest``
    splits into the same whole number of samples (at least one) per worker: the adaptive
    rule could never run the job at those sizes."""
    return [n for n in range(low, high + 1) if -(-lowest // n) > highest // n]


def check_every_size_has_a_batch(low: int, high: int, lowest: int, highest: int) -> None:
    """Refuse adaptive bounds that some allowed size can never use (at 3 workers a global
    batch of at most 2 gives some worker nothing), saying what to change."""
    missing = sizes_without_a_batch(low, high, lowest, highest)
    if not missing:
        return
    # The smallest max_global_batch that gives every size a batch: a multiple of each size
    # at or above min_global_batch.
    enough = max(-(-lowest // n) * n for n in missing)
    usable = [n for n in range(low, high + 1) if n not in missing]
    fewer = f", or max_workers to {max(usable)}" if usable and missing[0] > max(usable) else ""
    sizes = ", ".join(str(n) for n in missing)
    raise InvalidSpecError(
        f"batch_policy adaptive: at {sizes} worker(s) no global batch in min_global_batch.."
        f"max_global_batch ({lowest}..{highest}) gives every worker the same whole number "
        f"of samples; raise max_global_batch to {enough}{fewer}",
        field="max_global_batch",
    )


def _is_instance(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return False
    if kind is float:
        return isinstance(value, int | float)
    return isinstance(value, kind)


def check_field_types(values: Mapping[str, Any]) -> None:
    """Name the first field of a YAML/JSON mapping whose value has the wrong type (``None``
    stands for "not given" in the optional fields)."""
    for name, kind in _FIELD_TYPES.items():
        if name in _OPTIONAL_FIELDS and values.get(name) is None:
            continue
        if name in values and not _is_instance(values[name], kind):
            raise InvalidSpecError(
                f"field {name!r} must be {kind.__name__}, got {values[name]!r}", field=name
            )


def require(ok: bool, field_name: str, message: str) -> None:
    if not ok:
        raise InvalidSpecError(message, field=field_name)
