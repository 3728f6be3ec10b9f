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


class StableHint(Protocol):
    """Optional: a policy whose decisions depend on time only through known crossings.

    After a round with no decisions at ``snapshot.now``, ``stable_until(snapshot)`` is the
    earliest time at which the same world (no arrival, finish or other state change) could
    get a different answer. The simulator skips the rounds before it; the result is the same
    as asking every round (tests/core/test_simulator_skip.py checks the decision logs match).
    """

    def stable_until(self, snapshot: Snapshot) -> float: ...


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
