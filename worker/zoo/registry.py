"""The zoo by name: every model's builder and block count, listed here once.

Adding a model is one line in :data:`ZOO_MODELS` (its builder lives in a module of this
package). Nothing registers itself on import: this module imports the builders plainly, and
:func:`load_workload` resolves a name here or as a user entrypoint ``package.module:function``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from jigsaw.model.errors import InvalidSpecError
from worker.zoo.gpt import build_gpt_small
from worker.zoo.resnet import (
    build_resnet18_32,
    build_resnet18_224,
    build_resnet50_32,
    build_resnet50_224,
)
from worker.zoo.small import build_digits_cnn, build_mlp
from worker.zoo.vgg import build_vgg16_32, build_vgg16_224
from worker.zoo.vgg_fc import build_vgg16_32_fc
from worker.zoo.wide_mlp import build_digits_wide_mlp
from worker.zoo.workload import GLOBAL_RNG_LOCK, Workload, WorkloadBuilder


@dataclass(frozen=True)
class ZooModel:
    name: str
    """The name job specs, the scheduler and the profiles use."""
    build: WorkloadBuilder
    blocks: int
    """K, the number of blocks ``build`` cuts the model into (tests build each to check it)."""


ZOO_MODELS: tuple[ZooModel, ...] = (
    ZooModel("mlp", build_mlp, blocks=4),
    ZooModel("digits_cnn", build_digits_cnn, blocks=4),
    ZooModel("resnet18_32", build_resnet18_32, blocks=4),
    ZooModel("resnet18_224", build_resnet18_224, blocks=4),
    ZooModel("resnet50_32", build_resnet50_32, blocks=4),
    ZooModel("resnet50_224", build_resnet50_224, blocks=4),
    ZooModel("vgg16_32", build_vgg16_32, blocks=5),
    ZooModel("vgg16_224", build_vgg16_224, blocks=5),
    ZooModel("gpt_small", build_gpt_small, blocks=4),
    ZooModel("vgg16_32_fc", build_vgg16_32_fc, blocks=6),
    ZooModel("digits_wide_mlp", build_digits_wide_mlp, blocks=4),
)


def index_by_name(models: Iterable[ZooModel]) -> dict[str, ZooModel]:
    """``{name: model}``; a name listed twice is a mistake in the list, not an override."""
    by_name: dict[str, ZooModel] = {}
    for model in models:
        if model.name in by_name:
            raise ValueError(f"zoo model {model.name!r} is listed twice")
        by_name[model.name] = model
    return by_name


ZOO: Mapping[str, ZooModel] = index_by_name(ZOO_MODELS)


class UnknownModelError(InvalidSpecError):
    """The model name is neither a zoo model nor a ``module:function`` entrypoint."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="model")


class ModelBuildError(InvalidSpecError):
    """The model's builder raised (a user entrypoint with the wrong signature, a bug in it):
    deterministic, so the job fails at once instead of being retried."""

    def __init__(self, message: str) -> None:  # one argument: it crosses Ray pickled
        super().__init__(message, field="model")


def list_models() -> list[str]:
    return sorted(ZOO)


def load_workload(name: str, *, seed: int = 0, **options: Any) -> Workload:
    """Build a workload by zoo name or ``package.module:function`` entrypoint.

    The builder runs under ``torch.manual_seed(seed)`` so that every rank that calls this with
    the same seed gets bit-identical initial weights without any broadcast.
    """
    builder = resolve_builder(name)
    with GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            workload = builder(**options)
        except (MemoryError, torch.cuda.OutOfMemoryError):
            raise  # out of memory may pass on another GPU or later: the gang is retried
        except Exception as exc:  # the builder's own error: every rank and retry raises it
            raise ModelBuildError(
                f"building model {name!r} raised {type(exc).__name__}: {exc}"
            ) from exc
    if not isinstance(workload, Workload):
        raise UnknownModelError(
            f"{name!r} returned {type(workload).__name__}, expected worker.zoo.Workload"
        )
    return workload


def resolve_builder(name: str) -> WorkloadBuilder:
    if ":" in name:
        return _entrypoint(name)
    model = ZOO.get(name)
    if model is None:
        raise UnknownModelError(
            f"unknown model {name!r}: choose one of {', '.join(list_models())} "
            "or give an entrypoint 'package.module:function'"
        )
    return model.build


def _entrypoint(name: str) -> WorkloadBuilder:
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownModelError(
            f"cannot import module {module_name!r} of entrypoint {name!r}: {exc}"
        ) from exc
    except Exception as exc:  # the user's module raised while importing (SyntaxError, ...)
        raise UnknownModelError(
            f"cannot import module {module_name!r} of entrypoint {name!r}: importing it "
            f"raised {type(exc).__name__}: {exc}"
        ) from exc
    builder = getattr(module, attr, None)
    if not callable(builder):
        raise UnknownModelError(f"entrypoint {name!r}: {module_name} has no function {attr!r}")
    return builder  # type: ignore[no-any-return]
