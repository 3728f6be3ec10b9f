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

from jigsaw.errors import InvalidSpecError, JobNotFoundError

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error with an HTTP status, a readable ``detail`` and optional extra fields."""

    def __init__(self, status: int, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.extra = extra


def not_found(job_id: str) -> ApiError:
    return ApiError(404, f"no job with id {job_id!r}; list your jobs with GET /api/v1/jobs")


def error_response(status: int, detail: str, **extra: Any) -> JSONResponse:
    body = {"detail": detail, **{k: v for k, v in extra.items() if v is not None}}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)


def describe_validation(errors: Sequence[Any]) -> tuple[str, str | None]:
    """One sentence for the first problem, and the field it concerns."""
    if not errors:
        return "the request is invalid", None
    first = errors[0]
    kind = first.get("type", "")
    location = [str(part) for part in first.get("loc", ()) if part != "body"]
    if kind == "json_invalid":
        ctx = first.get("ctx", {})
        return f"the request body is not valid JSON ({ctx.get('error', 'parse error')})", None
    if kind == "extra_forbidden":
        name = location[-1] if location else "?"
        return f"unknown field {name!r}; remove it (see the schema at /docs)", name
    field = ".".join(location) if location else None
    if kind == "missing" and first.get("loc", ())[:1] == ("body",) and not location:
        return "a JSON request body is required", None
    if kind == "missing":
        return f"field {field!r} is required", field
    where = f"field {field!r}" if field else "the request body"
    if first.get("loc", ())[:1] in (("query",), ("header",), ("path",)):
        where = f"{first['loc'][0]} parameter {location[-1]!r}"
    return f"{where}: {first.get('msg', 'invalid value')}", field


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

    @app.exception_handler(InvalidSpecError)
    async def _invalid_spec(_request: Request, error: InvalidSpecError) -> JSONResponse:
        return error_response(422, str(error), field=error.field)

    @app.exception_handler(JobNotFoundError)
    async def _job_not_found(_request: Request, error: JobNotFoundError) -> JSONResponse:
        return error_response(404, not_found(error.job_id).detail)

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
