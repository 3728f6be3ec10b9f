"""Every error leaves as ``{"detail": "<one sentence saying what to fix>", ...}``."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.json_body import DuplicateKeyError
from jigsaw.model.errors import InvalidSpecError, JobNotFoundError

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error with an HTTP status, a readable ``detail`` and optional extra fields."""

    def __init__(self, status: int, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.extra = extra


def not_found(job_id: str) -> ApiError:
    """``job_id`` rides along, so a client (the CLI) can say it in its own words."""
    return ApiError(
        404, f"no job with id {job_id!r}; list your jobs with GET /api/v1/jobs", job_id=job_id
    )


def error_response(status: int, detail: str, **extra: Any) -> JSONResponse:
    body = {"detail": detail, **{k: v for k, v in extra.items() if v is not None}}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)


def describe_validation(errors: Sequence[Any]) -> tuple[str, str | None]:
    """One sentence for the first problem, and the user-facing field it concerns: a body
    field, query parameter, header or path parameter by its own name, never pydantic's
    internal location (union branches such as ``function-after[...]``, list indexes)."""
    if not errors:
        return "the request is invalid", None
    first = errors[0]
    kind = first.get("type", "")
    loc = tuple(first.get("loc", ()))
    if kind == "json_invalid":
        ctx = first.get("ctx", {})
        return f"the request body is not valid JSON ({ctx.get('error', 'parse error')})", None
    source = loc[0] if loc and loc[0] in ("body", "query", "header", "path") else "body"
    names = [part for part in loc[1:] if isinstance(part, str) and not _is_branch_tag(part)]
    if kind == "missing" and source == "body" and not names:
        return "a JSON request body is required", None
    if not names:
        return f"the request body: {_message(first)}", None
    # A body field's path keeps list positions ("scopes.0"); a parameter is named alone.
    path = [str(p) for p in loc[1:] if isinstance(p, int) or not _is_branch_tag(str(p))]
    field = names[0] if source != "body" else ".".join(path)
    if kind == "extra_forbidden":
        return f"unknown field {names[-1]!r}; remove it (see the schema at /docs)", names[-1]
    if kind == "missing":
        where = "field" if source == "body" else f"{source} parameter"
        return f"{where} {field!r} is required", field
    where = f"field {field!r}" if source == "body" else f"{source} parameter {field!r}"
    same_field = [e for e in errors if _field_loc(e) == _field_loc(first)]
    return f"{where}: {_union_message(same_field)}", field


_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none", "bytes"})


def _is_branch_tag(part: str) -> bool:
    """pydantic's name for a union branch or validator wrapper in an error location."""
    return (
        "[" in part
        or part in _TYPE_TAGS
        or part.startswith(("constrained-", "function-", "lax-", "strict-"))
    )


def _field_loc(error: Any) -> tuple[Any, ...]:
    loc = tuple(error.get("loc", ()))
    return loc[:2]


def _union_message(same_field: Sequence[Any]) -> str:
    """The first error's message; for a union field, the branch that matches the input's
    JSON type, or what the field takes when none does."""
    branches = [e for e in same_field if len(e.get("loc", ())) > 2 and _is_tag_at(e, 2)]
    if len(branches) < 2:
        return _message(same_field[0])
    value = same_field[0].get("input")
    for error in branches:
        tag = str(error["loc"][2])
        is_list_branch = "list" in tag
        if isinstance(value, list) == is_list_branch and isinstance(value, str | list):
            position = [part for part in error["loc"][3:] if isinstance(part, int)]
            prefix = f"item {position[0]}: " if position else ""
            return prefix + _message(error)
    kinds = sorted({_kind_of(str(e["loc"][2])) for e in branches})
    return f"must be {' or '.join(kinds)}, got {_json_type(value)}"


def _is_tag_at(error: Any, index: int) -> bool:
    part = error["loc"][index]
    return isinstance(part, str) and _is_branch_tag(part)


def _kind_of(tag: str) -> str:
    """What a union branch takes, from its tag (``list[constrained-int]``,
    ``function-after[printable(), str]``): whole words only (``printable`` is no ``int``)."""
    if re.search(r"\blist\b", tag):
        return "a list of integers"
    if re.search(r"\bstr\b", tag):
        return "a string"
    if re.search(r"\bint\b", tag):
        return "an integer"
    if re.search(r"\bfloat\b", tag):
        return "a number"
    return "a value of another type"


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _message(error: Any) -> str:
    """pydantic's message, said for the user (positions in lists, lengths in characters)."""
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    value = error.get("input")
    message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
    if kind == "too_long" and isinstance(value, str):
        message = f"must be at most {ctx.get('max_length')} characters, got {len(value)}"
    elif kind == "too_short" and isinstance(value, str):
        message = f"must be at least {ctx.get('min_length')} characters"
    return message


def allowed_methods(request: Request) -> list[str]:
    """Every method the OpenAPI document lists for the requested path (for ``Allow``)."""
    patterns = getattr(request.app.state, "path_methods", None)
    if patterns is None:
        patterns = [
            (re.compile("^" + re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(path)) + "$"), ops)
            for path, ops in request.app.openapi()["paths"].items()
        ]
        request.app.state.path_methods = patterns
    path = request.url.path
    return sorted({m.upper() for regex, ops in patterns if regex.match(path) for m in ops})


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, error: ApiError) -> JSONResponse:
        return error_response(error.status, error.detail, **error.extra)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(_request: Request, error: RequestValidationError) -> JSONResponse:
        detail, field = describe_validation(error.errors())
        return error_response(422, detail, field=field)

    @app.exception_handler(DuplicateKeyError)
    async def _duplicate_key(_request: Request, error: DuplicateKeyError) -> JSONResponse:
        return error_response(422, str(error.detail), field=error.field)

    @app.exception_handler(InvalidSpecError)
    async def _invalid_spec(_request: Request, error: InvalidSpecError) -> JSONResponse:
        detail = str(error)
        if error.field and error.field.lower() not in detail.lower():
            detail = f"field {error.field!r}: {detail}"
        return error_response(422, detail, field=error.field)

    @app.exception_handler(JobNotFoundError)
    async def _job_not_found(_request: Request, error: JobNotFoundError) -> JSONResponse:
        missing = not_found(error.job_id)
        return error_response(404, missing.detail, **missing.extra)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        detail = error.detail if isinstance(error.detail, str) else str(error.detail)
        if error.status_code == 404 and detail == "Not Found":
            detail = "no such route; the API lives under /api/v1 (see /docs)"
        if error.status_code == 400 and "parsing the body" in detail:
            detail = "the request body could not be parsed; send UTF-8 JSON"
        response = error_response(error.status_code, detail)
        if error.headers:
            response.headers.update(error.headers)
        if error.status_code == 405:
            allowed = allowed_methods(request)
            response = error_response(
                405, f"this route accepts only {', '.join(allowed) or 'no methods'}"
            )
            response.headers["Allow"] = ", ".join(allowed)
        return response

    @app.exception_handler(DataError)
    async def _data_error(_request: Request, error: DataError) -> JSONResponse:
        log.info("database refused a value: %s", error.orig)
        return error_response(422, "a value contains characters or numbers the database refuses")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=error)
        return error_response(500, "internal error; the server log has the details")
