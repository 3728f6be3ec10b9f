"""The policy plug-in point: a named function of a snapshot that returns decisions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from jigsaw.decisions import Decision
from jigsaw.errors import InvalidSpecError
from jigsaw.snapshot import Snapshot


class Policy(Protocol):
    name: str

    def decide(self, snapshot: Snapshot) -> list[Decision]: ...


PolicyFactory = Callable[..., Policy]
_REGISTRY: dict[str, PolicyFactory] = {}


def register(name: str) -> Callable[[PolicyFactory], PolicyFactory]:
    def decorator(factory: PolicyFactory) -> PolicyFactory:
        if name in _REGISTRY:
            raise ValueError(f"policy {name!r} is registered twice")
        _REGISTRY[name] = factory
        return factory

    return decorator


def policy_names() -> list[str]:
    return sorted(_REGISTRY)


def policy_factory(name: str) -> PolicyFactory:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InvalidSpecError(
            f"unknown policy {name!r}; choose one of: {', '.join(policy_names())}", field="policy"
        ) from None


def create_policy(name: str, **options: Any) -> Policy:
    return policy_factory(name)(**options)
