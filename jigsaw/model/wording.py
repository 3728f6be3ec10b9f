"""Words for counts in messages people read: ``1 worker``, ``2 workers``."""

from __future__ import annotations


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, the noun in the plural unless the count is one
    (``micro-batch`` becomes ``micro-batches``)."""
    if count == 1:
        return f"{count} {noun}"
    plural = f"{noun}es" if noun.endswith(("ch", "sh", "s", "x")) else f"{noun}s"
    return f"{count} {plural}"
