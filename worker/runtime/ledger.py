"""Idempotent progress reports: keyed by (job, attempt, iteration), applied compare-and-set.

A lease report can arrive late (a gang that was already replaced) or twice (a retried call).
The ledger accepts a report only if it names the newest attempt seen for the job and a larger
iteration than that attempt last reported; everything else is dropped here, and the scheduling
cycle's attempt fence drops whatever slips through from an attempt it has moved past.
"""

from __future__ import annotations

import threading


class ProgressLedger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, tuple[int, float]] = {}

    def accept(self, job_id: str, attempt: int, iteration: float) -> bool:
        """Record (attempt, iteration) if it moves the job forward; say whether it did."""
        with self._lock:
            seen = self._latest.get(job_id)
            if seen is not None:
                seen_attempt, seen_iteration = seen
                if attempt < seen_attempt:
                    return False
                if attempt == seen_attempt and iteration <= seen_iteration:
                    return False
            self._latest[job_id] = (attempt, iteration)
            return True

    def forget(self, job_id: str) -> None:
        with self._lock:
            self._latest.pop(job_id, None)
