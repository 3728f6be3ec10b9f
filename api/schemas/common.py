"""Pieces every schema shares."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

NO_CONTROL_CHARACTERS = "^[^\\x00-\\x1f\\x7f]*$"


def printable(value: str) -> str:
    """Refuse control characters (NUL does not even fit in Postgres); a lone UTF-16
    surrogate, which JSON allows but UTF-8 cannot store, becomes U+FFFD."""
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError("must not contain control characters")
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        value = "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in value)
    return value


Text = Annotated[
    str,
    AfterValidator(printable),
    # Validation is the readable validator above; the pattern tells clients the same rule.
    Field(json_schema_extra={"pattern": NO_CONTROL_CHARACTERS}),
]
"""A string without control characters."""

NOT_BLANK = "^[^\\x00-\\x1f\\x7f]*[^\\s\\x00-\\x1f\\x7f][^\\x00-\\x1f\\x7f]*$"
"""No control characters, and at least one that is not whitespace (Unicode whitespace, as
Python's ``str.strip`` counts it: a name of only no-break spaces is blank)."""

NonBlankText = Annotated[
    str,
    AfterValidator(printable),
    Field(json_schema_extra={"pattern": NOT_BLANK}),
]
"""A :data:`Text` the core refuses when it is only whitespace (a job's name and model): the
schema says so, so a client that follows the schema never meets that refusal."""


def integral(value: Any) -> Any:
    """JSON Schema's ``integer`` includes ``5.0``; so does this API (but not ``"5"``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Integer = Annotated[int, BeforeValidator(integral)]
"""A strict integer that also takes an integral number such as ``5.0``."""

Timestamp = Annotated[
    str | None,
    Field(
        description="ISO-8601 UTC time, or null",
        json_schema_extra={"format": "date-time"},
        examples=["2026-11-22T07:00:00.000Z"],
    ),
]


class Forbidding(BaseModel):
    """Request bodies: unknown fields are an error that names the field."""

    model_config = ConfigDict(extra="forbid", strict=True)


class Public(BaseModel):
    """Response bodies."""

    model_config = ConfigDict(extra="forbid")


class ErrorBody(Public):
    detail: str = Field(examples=["field 'workers': must be in 1..1024"])
    field: str | None = Field(default=None, examples=["workers"])
    state: str | None = Field(default=None, examples=["SUCCEEDED"])
    job_id: str | None = Field(
        default=None, examples=["j-3f2a9c01b7de"], description="404: the job id that was not found"
    )


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _error("the body could not be read (not UTF-8 JSON, or nested over 32 levels deep)"),
    401: _error("missing, invalid or revoked token"),
    403: _error("the token lacks the scope this route needs"),
    413: _error("body larger than JIGSAW_MAX_BODY_BYTES"),
    422: _error("invalid input; `field` names what to fix"),
}
"""Declared on every /api/v1 router (also replaces FastAPI's default 422 schema)."""
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: _error("no such job (or not yours)")}
