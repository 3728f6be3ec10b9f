"""Policy options from JSON (``JIGSAW_POLICY_OPTIONS``): plain values in, config objects out.

JSON has no dataclasses, so ``{"config": {"thresholds": [600, 6000]}}`` for ``las`` becomes
``config=LasConfig(thresholds=(600.0, 6000.0))``; for ``jigsaw``, ``{"config": {"guests":
false, "fairness_power": -0.5}}`` becomes a :class:`JigsawConfig` (the allocator's levers and
objective, :mod:`jigsaw.policies.allocator.config`); for ``timeslice``, ``{"config":
{"pack_gain": 0.1, "las": {...}}}`` a :class:`TimesliceConfig` holding a :class:`LasConfig`.
Unknown keys and bad values raise :class:`InvalidSpecError` naming the option, never a bare
TypeError.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from jigsaw.model.errors import InvalidSpecError
from jigsaw.policies.base import SUPPLIED, policy_factory
from jigsaw.policies.jigsaw import JigsawConfig
from jigsaw.policies.shared.fairness import LasConfig
from jigsaw.policies.timeslice import TimesliceConfig

_CONFIG_CLASSES: dict[str, type[Any]] = {
    "las": LasConfig,
    "jigsaw": JigsawConfig,
    "timeslice": TimesliceConfig,
}
NOT_SETTABLE = SUPPLIED | {"eta_of"}
"""Arguments the builder supplies and the service's eta seam: not settable as options."""


def policy_options(policy: str, raw: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``policy`` built from JSON-decoded ``raw``."""
    accepted = set(inspect.signature(policy_factory(policy)).parameters) - NOT_SETTABLE
    unknown = sorted(set(raw) - accepted)
    if unknown:
        choices = ", ".join(sorted(accepted)) or "none"
        raise InvalidSpecError(
            f"policy {policy!r} has no option {unknown[0]!r}; its options: {choices}",
            field="policy_options",
        )
    options = dict(raw)
    config, config_class = options.get("config"), _CONFIG_CLASSES.get(policy)
    if isinstance(config, dict) and config_class is not None:
        options["config"] = _build(config_class, config, f"{policy}.config")
    return options


def merged_options(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` over ``base`` (the options a trace's semantics sets): key by key, except
    that a JSON ``config`` (a dict) changes only the fields it names of ``base``'s config, and
    its ``las`` only the fields that one names, so ``{"config": {"pack_gain": 0.1}}`` for
    timeslice under Pollux's semantics keeps the Tiresias queues."""
    merged = {**base, **override}
    config, own = override.get("config"), base.get("config")
    if isinstance(config, dict) and dataclasses.is_dataclass(own) and not isinstance(own, type):
        fields = {f.name: getattr(own, f.name) for f in dataclasses.fields(own) if f.init}
        las, own_las = config.get("las"), fields.get("las")
        if isinstance(las, dict) and isinstance(own_las, LasConfig):
            config = {**config, "las": {**dataclasses.asdict(own_las), **las}}
        merged["config"] = {**fields, **config}
    return merged


def _build(cls: type[Any], raw: dict[str, Any], where: str) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in fields:
            raise InvalidSpecError(
                f"{where} has no option {key!r}; its options: {', '.join(sorted(fields))}",
                field="policy_options",
            )
        if key == "las" and isinstance(value, dict):
            value = _build(LasConfig, value, f"{where}.las")
        elif isinstance(value, list):
            value = tuple(float(v) for v in value)
        elif isinstance(value, int) and not isinstance(value, bool) and _is_float(fields[key]):
            value = float(value)  # JSON's -1 for a float option
        values[key] = value
    try:
        return cls(**values)
    except (TypeError, ValueError) as error:
        raise InvalidSpecError(f"{where}: {error}", field="policy_options") from None


def _is_float(field: dataclasses.Field[Any]) -> bool:
    return field.type in (float, "float")
