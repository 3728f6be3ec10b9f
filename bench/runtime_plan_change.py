"""Plan-change and preemption latency of the Ray runtime, from the scheduler's decision to the
moment it takes effect, in iterations and seconds.

One job (digits_cnn, 2 workers, batch 32, leases of 50, control points every 25 iterations)
runs on a private local Ray. Every ``--interval`` seconds the benchmark re-plans it on the
same GPUs (the executor's ``replan``) and notes the iteration rank 0 had reached; the lease
reports say at which iteration every rank installed that plan version. At the end it
preempts the job (``stop(checkpoint=True)``) and measures the time until the checkpoint is
written and the gang's resources are released.

    python -m bench.runtime_plan_change     # prints one JSON object
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from statistics import fmean
from typing import Any

from bench.runtime_common import (
    executor,
    job,
    provenance,
    spb_plan,
    start_local_ray,
    stop_local_ray,
)
from jigsaw.model.executor_events import Failed, Started
from worker.runtime.checkpoints import CheckpointStore

PLACEMENT = ((0, 0), (0, 1))
PLANS = [spb_plan(depths) for depths in ((0, 1), (0, 3), (0, 0), (0, 2))]
CONTROL_EVERY = 25
LEASE = 50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=8)
    parser.add_argument("--interval", type=float, default=2.3)
    args = parser.parse_args()
    temp_dir = start_local_ray()
    try:
        with tempfile.TemporaryDirectory(prefix="jrb-ckpt-") as root:
            result = measure(Path(root), args.changes, args.interval)
    finally:
        stop_local_ray(temp_dir)
    print(json.dumps({**result, "provenance": provenance()}, indent=2))


def measure(root: Path, changes: int, interval: float) -> dict[str, Any]:
    runner = executor(root, lease_iterations=LEASE, control_every=CONTROL_EVERY)
    the_job = job("replan", iterations=100_000)
    runner.start(the_job, PLACEMENT, spb_plan((0, 2)))
    gang = runner.gang(the_job.id)
    assert gang is not None
    wait_started(runner)
    decisions: list[dict[str, Any]] = []
    try:
        for change in range(changes):
            time.sleep(interval)
            at_iteration = gang.pids()[0].iteration
            offer = gang.offer_plan(PLANS[change % len(PLANS)])
            decisions.append({"version": offer.version, "decided_at_iteration": at_iteration})
        time.sleep(interval * 1.5)  # let the last version land in a reported lease
        stop_iteration = gang.pids()[0].iteration
        stop_started = time.perf_counter()
        runner.stop(the_job.id, checkpoint=True)
        gang.join(120)
        stop_s = time.perf_counter() - stop_started
    finally:
        runner.shutdown()
    latest = CheckpointStore(root, the_job.id).latest()
    assert latest is not None, "the preemption wrote no checkpoint"
    leases = gang.reports
    iteration_s = fmean(
        lease.timings.steps_wall_s / lease.iterations
        for lease in leases
        if lease.iterations > 0 and lease.timings is not None
    )
    switches = {version: iteration for lease in leases for version, iteration in lease.switches}
    changes_seen = []
    for decision in decisions:
        switched = switches.get(decision["version"])
        if switched is None:
            continue  # superseded: a newer version was held by every rank at the same point
        lag = switched - decision["decided_at_iteration"]
        changes_seen.append({**decision, "switched_at": switched, "lag_iterations": lag})
    lags = [c["lag_iterations"] for c in changes_seen]
    return {
        "benchmark": "runtime_plan_change",
        "job": {"model": "digits_cnn", "workers": 2, "batch_size": 32},
        "lease_iterations": LEASE,
        "control_every": CONTROL_EVERY,
        "mean_iteration_s": iteration_s,
        "plan_change": {
            "decisions": len(decisions),
            "applied": len(changes_seen),
            "lag_iterations_mean": fmean(lags),
            "lag_iterations_max": max(lags),
            "lag_seconds_mean": fmean(lags) * iteration_s,
            "lag_seconds_max": max(lags) * iteration_s,
            "bound_iterations": CONTROL_EVERY,
            "changes": changes_seen,
        },
        "preemption": {
            "decided_at_iteration": stop_iteration,
            "checkpoint_iteration": latest[0],
            "lag_iterations": latest[0] - stop_iteration,
            "decision_to_released_s": stop_s,
        },
    }


def wait_started(runner: Any, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for event in runner.poll(time.time()):
            if isinstance(event, Failed):
                raise RuntimeError(event.reason)
            if isinstance(event, Started):
                return
        time.sleep(0.1)
    raise TimeoutError("the gang did not start")


if __name__ == "__main__":
    main()
