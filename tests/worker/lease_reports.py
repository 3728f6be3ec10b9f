"""One lease report with plain figures, for tests of what a report carries to the control plane
(the fields a test does not name are the same small constants everywhere)."""

from __future__ import annotations

from typing import Any

from worker.runtime.messages import LeaseReport


def lease_report(**fields: Any) -> LeaseReport:
    """Rank 0's report of lease 0 from iteration 0; ``fields`` name what the test is about
    (at least ``end_iteration``, ``plan``, ``num_blocks``, ``losses`` and ``samples``)."""
    values: dict[str, Any] = {
        "job_id": "j",
        "attempt": 0,
        "rank": 0,
        "lease": 0,
        "start_iteration": 0,
        "plan_version": 0,
        "switches": (),
        "stopped": False,
        "compute_s": 1.0,
        "sync_s": 0.1,
        "iteration_s": 1.2,
        "steps_wall_s": 1.3,
        "wall_s": 1.4,
        "control_s": 0.0,
        "saved_activation_bytes": 1,
        "peak_memory_bytes": 1,
        "bytes_sent": 1,
        **fields,
    }
    return LeaseReport(**values)
