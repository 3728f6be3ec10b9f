"""Profiles by name: the measured ``jigsaw/data/profiles/<model>.json`` files, validated
(:func:`parse_profile`, schema in docs/ORACLE.md), and the analytic defaults of
:mod:`jigsaw.model.profiles` where no measured file exists (:class:`ProfileCatalog`)."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.profiles import (
    ANALYTIC_MODELS,
    MEASURED,
    ZOO_MODELS,
    BlockProfile,
    ModelProfile,
    analytic_default_batch,
    analytic_profile,
    canonical_name,
)


def parse_profile(data: Any, path: str) -> ModelProfile:
    """Validate a measured profile JSON object (schema in docs/ORACLE.md)."""
    if not isinstance(data, dict):
        raise InvalidSpecError(f"{path}: a profile must be a JSON object")
    try:
        model = str(data["model"])
        raw_blocks = data["blocks"]
        if not isinstance(raw_blocks, list) or not raw_blocks:
            raise InvalidSpecError(f"{path}: 'blocks' must be a non-empty list")
        blocks = tuple(_parse_block(raw, path) for raw in raw_blocks)
    except KeyError as missing:
        raise InvalidSpecError(f"{path}: missing field {missing}") from None
    if [b.index for b in blocks] != list(range(1, len(blocks) + 1)):
        raise InvalidSpecError(f"{path}: block indices must be 1..{len(blocks)} in order")
    declared = data.get("num_blocks", len(blocks))
    if declared != len(blocks):
        raise InvalidSpecError(f"{path}: num_blocks is {declared} but {len(blocks)} blocks listed")
    batch = data.get("profiled_batch_size")
    analytic_batch = analytic_default_batch(model)
    default_batch = analytic_batch if analytic_batch is not None else int(batch or 32)
    device = data.get("device")
    provenance = f"{path} ({data.get('command', 'unknown command')}, {data.get('created', '?')})"
    samples = data.get("train_samples")
    if samples is not None and (
        isinstance(samples, bool) or not isinstance(samples, int) or samples < 1
    ):
        raise InvalidSpecError(f"{path}: train_samples must be a positive integer, got {samples!r}")
    return ModelProfile(
        model,
        blocks,
        MEASURED,
        default_batch,
        str(device) if device else None,
        provenance,
        train_samples=samples,
    )


def _parse_block(raw: Any, path: str) -> BlockProfile:
    if not isinstance(raw, dict):
        raise InvalidSpecError(f"{path}: every block must be a JSON object")

    def number(key: str) -> float:
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise InvalidSpecError(f"{path}: block {raw.get('index')}: {key} must be >= 0")
        return float(value)

    def optional(key: str) -> float | None:
        return None if raw.get(key) is None else number(key)

    return BlockProfile(
        index=int(raw["index"]),
        name=str(raw.get("name", f"block{raw['index']}")),
        forward_flops_per_sample=number("forward_flops_per_sample"),
        backward_flops_per_sample=number("backward_flops_per_sample"),
        param_bytes=int(number("param_bytes")),
        activation_bytes_per_sample=int(number("activation_bytes_per_sample")),
        forward_time_s_per_sample=optional("forward_time_s_per_sample"),
        backward_time_s_per_sample=optional("backward_time_s_per_sample"),
        output_bytes_per_sample=(
            None
            if raw.get("output_bytes_per_sample") is None
            else int(number("output_bytes_per_sample"))
        ),
        linear_layers=_parse_linear_layers(raw.get("linear_layers") or [], path, raw),
    )


def _parse_linear_layers(
    raw: Any, path: str, block: dict[str, Any]
) -> tuple[tuple[int, int, bool], ...]:
    where = f"{path}: block {block.get('index')}: linear_layers"
    if not isinstance(raw, list):
        raise InvalidSpecError(f"{where} must be a list")
    layers: list[tuple[int, int, bool]] = []
    for layer in raw:
        if not isinstance(layer, dict):
            raise InvalidSpecError(f"{where}: every layer must be a JSON object")
        sizes = (layer.get("in_features"), layer.get("out_features"))
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in sizes):
            raise InvalidSpecError(f"{where}: in_features and out_features must be >= 1")
        layers.append(
            (int(layer["in_features"]), int(layer["out_features"]), bool(layer.get("bias", True)))
        )
    return tuple(layers)


class ProfileCatalog:
    """Profiles by name: measured files first, analytic defaults otherwise. Cached."""

    def __init__(self, directory: Path | None = None, *, use_measured: bool = True) -> None:
        self._directory = directory
        self._use_measured = use_measured
        self._cache: dict[str, ModelProfile] = {}

    def get(self, model: str) -> ModelProfile:
        profile = self._cache.get(model)
        if profile is None:
            profile = self._load(canonical_name(model)[0])
            self._cache[model] = profile
        return profile

    def source(self, model: str) -> str:
        return self.get(model).source

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(set(ZOO_MODELS) | set(ANALYTIC_MODELS) | set(self._measured_names())))

    def _load(self, name: str) -> ModelProfile:
        if self._use_measured:
            text = self._read_measured(name)
            if text is not None:
                label = f"jigsaw/data/profiles/{name}.json"
                try:
                    data = json.loads(text)
                except json.JSONDecodeError as error:
                    raise InvalidSpecError(f"{label}: not valid JSON ({error})") from None
                return parse_profile(data, label)
        return analytic_profile(name)

    def _read_measured(self, name: str) -> str | None:
        # Not a shipped profile's name (and a name too long for the file system would raise
        # OSError from is_file): no measured profile, the analytic fallback decides.
        if len(name) > 128 or not re.fullmatch(r"[a-z0-9_]+", name):
            return None
        if self._directory is not None:
            path = self._directory / f"{name}.json"
            return path.read_text() if path.is_file() else None
        entry = resources.files("jigsaw").joinpath(f"data/profiles/{name}.json")
        return entry.read_text() if entry.is_file() else None

    def _measured_names(self) -> list[str]:
        if not self._use_measured:
            return []
        if self._directory is not None:
            folder = self._directory
            return [p.stem for p in folder.glob("*.json")] if folder.is_dir() else []
        entry = resources.files("jigsaw").joinpath("data/profiles")
        if not entry.is_dir():
            return []
        return [p.name[:-5] for p in entry.iterdir() if p.name.endswith(".json")]
