"""Typed dependencies: the app state, a DB session, the store and the calling principal."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.errors import ApiError
from api.state import AppState
from api.store import SqlStore
from api.tokens import Principal

bearer = HTTPBearer(auto_error=False, description="an API token: Authorization: Bearer <token>")


# The cheap dependencies are ``async def``: FastAPI runs every sync dependency on a worker
# thread, and those hops cost more server CPU than the work itself (docs/BENCHMARKS.md).


async def reject_unknown_query(request: Request) -> None:
    """Unknown or repeated query parameters are a 422 naming them, like unknown body fields
    (a typo such as ``?stat=RUNNING`` would otherwise be silently ignored)."""
    route = request.scope.get("route")
    if route is None or not request.query_params:
        return
    params = _query_params(route)
    for name in set(request.query_params):
        if name not in params:
            choices = ", ".join(sorted(params)) or "none"
            raise ApiError(
                422, f"unknown query parameter {name!r}; this route takes: {choices}", field=name
            )
        if not params[name] and len(request.query_params.getlist(name)) > 1:
            raise ApiError(422, f"query parameter {name!r} may be given only once", field=name)


def _query_params(route: object) -> dict[str, bool]:
    """Query parameter names of a route, each with whether it takes a list."""
    cached: dict[str, bool] | None = getattr(route, "_jigsaw_query_params", None)
    if cached is None:
        cached = _walk_query(route.dependant)  # type: ignore[attr-defined]
        route._jigsaw_query_params = cached  # type: ignore[attr-defined]
    return cached


def _walk_query(dependant: Any) -> dict[str, bool]:
    names = {p.alias: _is_list(p.field_info.annotation) for p in dependant.query_params}
    for sub in dependant.dependencies:
        names.update(_walk_query(sub))
    return names


def _is_list(annotation: Any) -> bool:
    origin = get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return True
    if origin in (Union, UnionType):
        return any(_is_list(arg) for arg in get_args(annotation))
    return False


async def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.jigsaw
    return state


StateDep = Annotated[AppState, Depends(get_state)]


async def get_store(state: StateDep) -> SqlStore:
    return state.store


StoreDep = Annotated[SqlStore, Depends(get_store)]


_BEARER = re.compile(r"^[Bb][Ee][Aa][Rr][Ee][Rr] ([\x21-\x7e]+)$")
"""``Bearer``, exactly one space, and a token of printable ASCII (RFC 6750's b64token and
more): ``Bearer  <token>`` with two spaces is refused, not trimmed."""


async def current_principal(
    state: StateDep,
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    header = request.headers.get("authorization")
    if header is None:
        raise ApiError(401, "missing bearer token: send Authorization: Bearer <token>")
    match = _BEARER.match(header)
    if match is None:
        raise ApiError(
            401,
            "malformed Authorization header: send exactly 'Bearer <token>' "
            "(one space, no spaces inside the token)",
        )
    token = match.group(1)
    principal = state.principals.cached(token)
    if principal is None:  # a cache miss queries the database: not on the event loop
        principal = await run_in_threadpool(state.principals.get, token)
    if principal is None:
        raise ApiError(
            401,
            "invalid or revoked token; ask an admin for a new one (an admin token creates "
            "one with `jigsaw-cli token create --user NAME`)",
        )
    return principal


CurrentUser = Annotated[Principal, Depends(current_principal)]


def require_scopes(*allowed: str) -> Callable[[Principal], Awaitable[Principal]]:
    async def check(principal: CurrentUser) -> Principal:
        if principal.scopes.isdisjoint(allowed):
            raise ApiError(
                403,
                f"this route needs a token with scope {' or '.join(allowed)}; "
                f"yours has {', '.join(sorted(principal.scopes)) or 'none'}",
            )
        return principal

    return check


Submitter = Annotated[Principal, Depends(require_scopes("user", "admin"))]
"""Users and admins: submit, list, inspect and cancel jobs."""
Reader = Annotated[Principal, Depends(require_scopes("user", "admin", "worker"))]
"""Any valid token: cluster and scheduler views."""
Admin = Annotated[Principal, Depends(require_scopes("admin"))]
