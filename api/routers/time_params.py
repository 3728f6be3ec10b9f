"""Query parameters that name a moment (``?since=``): ISO-8601 text, refused naming the field."""

from __future__ import annotations

from api.errors import ApiError
from api.timefmt import parse_iso


def parse_since(since: str) -> float:
    """``since`` as a Unix time; a 422 naming ``since`` when it is not an ISO-8601 time."""
    try:
        return parse_iso(since)
    except (ValueError, OverflowError):
        raise ApiError(
            422,
            f"since={since!r} is not an ISO-8601 time such as 2026-11-22T07:00:00Z",
            field="since",
        ) from None
