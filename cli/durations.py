"""Durations as people type them (``--since 10m``): ``30s``, ``10m``, ``2h``, ``1d``,
``1h30m``; a bare number is seconds."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from cli.errors import UsageError

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_WHOLE = re.compile(r"(?:\d+(?:\.\d+)?[smhd])+")


def parse_duration(text: str, flag: str) -> float:
    """Seconds in ``text``; a usage error naming ``flag`` when it is no duration."""
    value = text.strip().lower()
    try:
        seconds = float(value)
    except ValueError:
        if not _WHOLE.fullmatch(value):
            raise UsageError(
                f"{flag} {text!r} is not a duration; write it as 30s, 10m, 2h, 1d or 1h30m"
            ) from None
        seconds = sum(float(n) * UNITS[unit] for n, unit in _PART.findall(value))
    if not 0 <= seconds < 1e10:
        raise UsageError(f"{flag} {text!r} is not a duration of zero or more seconds")
    return seconds


def iso_before(seconds: float, now: datetime | None = None) -> str:
    """The ISO-8601 UTC time ``seconds`` ago (what the API's ``since`` takes)."""
    moment = (now or datetime.now(UTC)) - timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
