"""The garbage collector while a trace loads and replays: paused, with what existed before
frozen.

A replay allocates thousands of short-lived objects a round (a round's columns, views and
snapshots) beside a large, long-lived heap (the trace's jobs, the store, the oracle's
tables). Reference counting frees a round's objects when the next replaces them; CPython's
cyclic collector, which runs after every few hundred net allocations, only walks them. It
finds almost nothing: counted with the collector paused, a replay of three days of Philly
at 256 GPUs left 335 to 5,016 objects of cyclic garbage (fifo to jigsaw), one of a Pollux
workload 3,753 (pollux) and 8,085 (jigsaw), while the collections cost las's full-Philly
replay about 1.2 s, and the full ones while the trace loads about 0.4 s more. So while a
trace loads or replays the automatic collector is paused and what exists when it starts is
frozen (no collection walks it); on exit both are put back as they were, with what the
replay made in the oldest generation, where the next full collection frees what it left.
An explicit ``gc.collect()`` still works inside. Nothing a replay decides depends on this
(tests/core/simulator/test_collector.py).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_collector() -> Iterator[None]:
    """Freeze what exists and pause automatic collection; on exit put both back."""
    enabled = gc.isenabled()
    frozen_before = gc.get_freeze_count()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        # What the replay made is frozen too before the collector resumes: paused, it kept
        # all of it young, and the first young collection would walk every object (about
        # 1 s after las's full Philly). Unfrozen, it all joins the oldest generation.
        gc.freeze()
        if enabled:
            gc.enable()
        if not frozen_before:  # frozen by someone else before: leave it as it was
            gc.unfreeze()
