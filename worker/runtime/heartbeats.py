"""Hang detection: a rank that completes no iteration for ``hang_timeout_s`` is hung.

Each actor answers ``heartbeat()`` from its control concurrency group while a lease runs. A
rank blocked in a collective waiting for a stuck peer stalls too, so the rank furthest behind
is named. A rank that does not even answer (a native call holding the GIL) is hung as well.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import ray

from worker.runtime.failures import GangFailure, diagnose
from worker.runtime.messages import Heartbeat


class HeartbeatWatch:
    def __init__(self, hang_timeout_s: float) -> None:
        self.hang_timeout_s = hang_timeout_s
        self._silent_since: dict[int, float] = {}

    def check(self, actors: Sequence[Any]) -> None:
        """Raise :class:`GangFailure` if a rank is hung; otherwise return."""
        timeout = self.hang_timeout_s
        refs = [actor.heartbeat.remote() for actor in actors]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=min(timeout, 10.0))
        now = time.monotonic()
        beats: list[Heartbeat] = []
        for rank, ref in enumerate(refs):
            if ref not in ready:
                since = self._silent_since.setdefault(rank, now)
                if now - since > timeout:
                    raise GangFailure(
                        f"worker rank {rank} stopped answering heartbeats for {now - since:.0f}s "
                        "(hung); restarting the gang from its last checkpoint",
                        retryable=True,
                    )
                continue
            self._silent_since.pop(rank, None)
            try:
                beats.append(ray.get(ref, timeout=0))
            except Exception as exc:
                raise diagnose(exc, []) from exc
        if any(b.busy and b.seconds_since_progress > timeout for b in beats):
            # Its peers wait in collectives for it: blame the rank that is furthest behind.
            culprit = min(beats, key=lambda b: (b.iteration, -b.seconds_since_progress))
            raise GangFailure(
                f"worker rank {culprit.rank} made no progress for "
                f"{culprit.seconds_since_progress:.0f}s at iteration {culprit.iteration} (hung); "
                "restarting the gang from its last checkpoint",
                retryable=True,
            )
