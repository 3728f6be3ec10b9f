"""UNIX seconds (how the store keeps time) to ISO-8601 UTC strings (how the API shows it)."""

from __future__ import annotations

from datetime import UTC, datetime


def iso(moment: float | None) -> str | None:
    """``1795417200.5`` -> ``"2026-11-22T07:00:00.500Z"`` (millisecond precision)."""
    if moment is None:
        return None
    text = datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def parse_iso(text: str) -> float:
    """Parse an ISO-8601 time; one without a zone is taken as UTC."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
