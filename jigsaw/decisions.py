"""What a policy may decide. Policies return these and change nothing themselves."""

from __future__ import annotations

from dataclasses import dataclass

from jigsaw.cluster import Placement
from jigsaw.plan import Plan


@dataclass(frozen=True, slots=True)
class Start:
    """Reserve ``placement`` for a waiting job's whole gang and launch it with ``plan``."""

    job_id: str
    placement: Placement
    plan: Plan
    reason: str


@dataclass(frozen=True, slots=True)
class Preempt:
    """Checkpoint and stop a running job; ``by`` names the job it makes room for."""

    job_id: str
    reason: str
    by: str | None = None


@dataclass(frozen=True, slots=True)
class Replan:
    """Switch a running job to a new SPB plan and/or placement at its next lease boundary."""

    job_id: str
    plan: Plan
    placement: Placement
    reason: str


Decision = Start | Preempt | Replan
