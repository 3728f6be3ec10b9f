"""The policy plug-in point: a named function of a snapshot that returns decisions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from jigsaw.model.decisions import Decision
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.snapshot import Snapshot


class Policy(Protocol):
    """A policy decides; it changes nothing (state it carries between rounds it keeps in
    :meth:`KeepsRoundState.end_round`, which the cycle calls after apply). Besides ``decide``
    it declares speed hints, which let the simulator skip work without changing a single
    decision."""

    name: str
    periodic: bool
    """Decides in rounds (every ``round_s``), not only on arrivals and finishes."""
    serves_arrival_prefix: bool
    """Decides from the oldest waiting jobs only, never more of them than there are free GPUs
    plus one: the simulator may hold the rest of the queue back."""
    resizes_running_jobs: bool
    """Changes running jobs' sizes round after round (pollux): the simulator asks it every
    round while any gang runs, not only when something arrived, finished or waits."""
    sizes_elastic_jobs: bool
    """May resize an elastic job as soon as its workers are up (jigsaw's elastic rule): the
    simulator holds a round after such a job starts, as the service's next tick would."""

    def decide(self, snapshot: Snapshot) -> list[Decision]: ...

    def stable_until(self, snapshot: Snapshot) -> float | None:
        """After a round with no decisions at ``snapshot.now``: the earliest time at which the
        same world (no arrival, finish or other state change) could get a different answer, or
        ``None`` when the policy cannot say. The simulator skips the rounds before it; the
        result is the same as asking every round (tests/core/simulator/test_simulator_skip.py)."""
        ...


@runtime_checkable
class KeepsRoundState(Protocol):
    """A policy that carries state from one round to the next (Gavel's allocation, held
    between its resets). ``decide`` only reads that state, so asking twice, or about part of
    a snapshot (poison bisection), changes nothing; the scheduling cycle calls
    :meth:`end_round` once per round, after it applied the decisions."""

    def end_round(self, snapshot: Snapshot) -> None:
        """Keep the state the round decided from ``snapshot`` leaves (the snapshot the
        decisions came from: poison jobs already taken out)."""
        ...


class PolicyBase:
    """Defaults for the speed hints: no rounds, the whole queue, no stability promise."""

    name = "policy"
    periodic = False
    serves_arrival_prefix = False
    resizes_running_jobs = False
    sizes_elastic_jobs = False

    def stable_until(self, snapshot: Snapshot) -> float | None:
        del snapshot
        return None


PolicyFactory = Callable[..., Policy]

SUPPLIED = frozenset({"oracle", "planner", "goodput"})
"""What a policy factory may ask the builder for (:mod:`jigsaw.policies.builder`): the oracle,
the planner, and ``goodput``, the source of what jobs have measured
(:class:`~jigsaw.goodput.source.GoodputSource`; ``None`` when the world offers none: a trace
without measurements, ``--knowledge oracle``). Every policy that declares ``goodput`` is
handed the same source, so no policy knows more than another."""


@dataclass(frozen=True, slots=True)
class Registration:
    factory: PolicyFactory
    uses: frozenset[str]
    """Which of :data:`SUPPLIED` the builder hands the factory."""


_REGISTRY: dict[str, Registration] = {}


def register(
    name: str, *, uses: frozenset[str] = frozenset()
) -> Callable[[PolicyFactory], PolicyFactory]:
    unknown = uses - SUPPLIED
    if unknown:
        raise ValueError(f"policy {name!r} uses {sorted(unknown)}; suppliable: {sorted(SUPPLIED)}")

    def decorator(factory: PolicyFactory) -> PolicyFactory:
        if name in _REGISTRY:
            raise ValueError(f"policy {name!r} is registered twice")
        _REGISTRY[name] = Registration(factory, uses)
        return factory

    return decorator


def policy_names() -> list[str]:
    return sorted(_REGISTRY)


def registration(name: str) -> Registration:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InvalidSpecError(
            f"unknown policy {name!r}; choose one of: {', '.join(policy_names())}", field="policy"
        ) from None


def policy_factory(name: str) -> PolicyFactory:
    return registration(name).factory


def create_policy(name: str, **options: Any) -> Policy:
    return policy_factory(name)(**options)
