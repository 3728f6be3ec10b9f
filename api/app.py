"""The FastAPI app factory: routers, error handlers, limits, state."""

from __future__ import annotations

import logging

from fastapi import FastAPI
from sqlalchemy import Engine

from api.auth_cache import PrincipalCache
from api.db import make_engine
from api.errors import install_error_handlers
from api.limits import BodyLimit
from api.metrics import Metrics
from api.oracle_view import build_planner, oracle_view_for
from api.routers import cluster, health, job_telemetry, jobs, models, scheduler, tokens
from api.settings import Settings
from api.state import AppState
from api.store import SqlStore

log = logging.getLogger(__name__)

DESCRIPTION = """\
The JigSaw control plane: submit deep-learning training jobs that use Structured Partial
Backpropagation, watch them, and see how the scheduler packs them onto GPUs.

Authenticate with `Authorization: Bearer <token>`. Errors are
`{"detail": "<what to fix>", ...}`. See docs/API.md.
"""


def build_state(settings: Settings, engine: Engine | None = None) -> AppState:
    engine = engine if engine is not None else make_engine(settings.resolved_database_url)
    planner = build_planner(settings.gpu_type, settings.worker_memory_gib)
    return AppState(
        settings=settings,
        engine=engine,
        store=SqlStore(engine),
        principals=PrincipalCache(engine),
        oracle=oracle_view_for(settings, planner),
        metrics=Metrics(engine),
        planner=planner,
    )


def create_app(settings: Settings | None = None, *, state: AppState | None = None) -> FastAPI:
    """An app over ``state`` (built from ``settings`` when not given). Does not migrate or
    start the scheduler: :func:`api.server.serve` does that."""
    if state is None:
        state = build_state(settings if settings is not None else Settings())
    app = FastAPI(
        title="JigSaw control plane",
        version="1.0.0",
        description=DESCRIPTION,
        openapi_tags=[
            {"name": "jobs", "description": "submit, list, inspect and cancel jobs"},
            {"name": "cluster", "description": "nodes, GPUs, packing, utilization"},
            {"name": "scheduler", "description": "leader state and the queue"},
            {"name": "models", "description": "the model zoo and the plan types that fit"},
            {"name": "tokens", "description": "API tokens (admin)"},
            {"name": "health", "description": "probes and metrics"},
        ],
    )
    app.state.jigsaw = state
    install_error_handlers(app)
    for module in (health, jobs, job_telemetry, cluster, scheduler, models, tokens):
        app.include_router(module.router)
    _include_dashboard(app)
    app.add_middleware(BodyLimit, max_bytes=state.settings.max_body_bytes)
    return app


def _include_dashboard(app: FastAPI) -> None:
    try:
        from api.dashboard import router as dashboard_router
    except ModuleNotFoundError as error:
        if error.name not in ("api.dashboard",):
            raise
        log.info("no dashboard module; serving the API only")
        return
    app.include_router(dashboard_router)
