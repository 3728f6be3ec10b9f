"""Byte counts as people read them: the largest binary unit that still shows the number."""

from __future__ import annotations

UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def human_bytes(size: float) -> str:
    """``0.18 GiB``, ``95.37 MiB``, ``512 B``: the largest unit in which the value is at least
    0.1, with two decimals, so a small limit never prints as ``0.00 GiB``."""
    value = float(size)
    unit = 0
    while unit < len(UNITS) - 1 and abs(value) / 1024 >= 0.1:
        value /= 1024
        unit += 1
    return f"{value:.0f} B" if unit == 0 else f"{value:.2f} {UNITS[unit]}"
