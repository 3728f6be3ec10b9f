"""The garbage collector during a replay: what was loaded before it is frozen, and young
collections run less often.

A replay allocates thousands of short-lived objects a round (a round's columns, views and
snapshots) beside a large, long-lived heap (the trace's jobs, the store, the oracle's
tables). CPython's collector runs a young collection every 700 net allocations and, from
time to time, a full one that walks every tracked object, the trace's included. Neither
finds much: a round's objects are freed by reference counting when the next replaces them.
So while a replay runs the objects that exist when it starts are frozen (no collection
walks them) and a young collection waits for :data:`YOUNG_THRESHOLD` allocations; both are
put back when it ends. Collections still run, so cyclic garbage is still freed. Nothing a
replay decides depends on this (tests/core/simulator/test_collector.py).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 50_000
"""Net allocations between young collections during a replay (CPython's default: 700)."""


@contextmanager
def replay_collector() -> Iterator[None]:
    """Freeze what exists, raise the young threshold; on exit put both back."""
    threshold = gc.get_threshold()
    frozen_before = gc.get_freeze_count()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        if not frozen_before:  # frozen by someone else before: leave it as it was
            gc.unfreeze()
