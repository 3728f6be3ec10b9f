"""/healthz, /readyz and /metrics (no token needed: probes and Prometheus scrape these)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy.exc import SQLAlchemyError

from api.deps import StateDep
from api.migrate import current_revision, head_revision
from api.routers.scheduler import heartbeat_fresh

router = APIRouter(tags=["health"])


@router.get("/healthz", operation_id="healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    operation_id="readyz",
    responses={503: {"description": "not ready; `checks` says what is missing"}},
)
def readyz(state: StateDep) -> JSONResponse:
    """Ready: database reachable, migrations at head, a scheduler loop alive."""
    checks: dict[str, str] = {}
    try:
        revision = current_revision(state.engine)
        head = head_revision()
        checks["database"] = "ok"
        checks["migrations"] = "ok" if revision == head else f"at {revision}, head is {head}"
        leader = state.store.leader_state()
        heartbeat = leader.heartbeat_at if leader is not None else None
        alive = heartbeat_fresh(heartbeat, state.settings.round_seconds, time.time())
        checks["scheduler"] = "ok" if alive else "no scheduler heartbeat"
    except SQLAlchemyError as error:
        checks["database"] = f"unreachable: {type(error).__name__}"
    ready = all(value == "ok" for value in checks.values()) and len(checks) == 3
    body = {"status": "ready" if ready else "not ready", "checks": checks}
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/metrics", operation_id="metrics", response_class=Response)
def metrics(state: StateDep) -> Response:
    """Prometheus text format; prefix ``jigsaw_``; no per-job labels."""
    return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
