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


def since_time(text: str, flag: str) -> str:
    """``--since`` as the API's ISO-8601 time: a duration back from now (``2h``) or a moment
    (``2026-11-27``, ``2026-11-27T01:30``, ``...Z`` or with an offset; without one, UTC)."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError:
        try:
            return iso_before(parse_duration(text, flag))
        except UsageError:
            raise UsageError(
                f"{flag} {text!r} is neither a duration (30s, 10m, 2h, 1d) nor a time "
                "(2026-11-27 or 2026-11-27T01:30Z)"
            ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
