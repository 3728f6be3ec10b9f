"""What one app instance holds: settings, engine, store, caches, metrics, the scheduler."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from api.auth_cache import PrincipalCache
from api.metrics import Metrics
from api.oracle_view import OracleView
from api.settings import Settings
from api.store import SqlStore
from jigsaw.planning.planner import Planner

if TYPE_CHECKING:
    from api.scheduler.service import SchedulerService


@dataclass
class AppState:
    settings: Settings
    engine: Engine
    store: SqlStore
    principals: PrincipalCache
    oracle: OracleView
    metrics: Metrics
    planner: Planner
    """The service's one planner: the submission checks, ``jobs:validate``, the models view
    and the scheduler's policy all ask this instance (``oracle.planner`` is the same)."""
    scheduler: SchedulerService | None = field(default=None)
