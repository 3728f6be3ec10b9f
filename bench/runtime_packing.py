"""Packing vs exclusive on the Ray runtime, with the oracle's prediction for the same case.

Two identical SPB jobs (digits_cnn, 2 workers, staircase plan (0, 2), batch 32) either run
*exclusively*, one after the other, each alone on two (logical) GPUs, or *packed*: both at
once, their workers sharing the same two GPUs (bundles of 0.25 GPU each). Throughput is the
jobs' total iterations over the time to finish them. The oracle predicts the same two cases
for V100s (Oracle.predict with the other job's GPU load) and we compare the ratios
packed/exclusive, since absolute times of a V100 and this CPU are not comparable.

On this machine there is no GPU: "sharing a GPU" is CPU time-sharing of 4 worker processes
on 2 cores (shared with other work), so the measured gain comes only from filling the idle
time a staircase plan leaves on its partial workers, not from GPU SM sharing.

    python -m bench.runtime_packing     # prints one JSON object
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from statistics import fmean, median
from typing import Any

from bench.runtime_common import (
    executor,
    job,
    provenance,
    run_jobs,
    spb_plan,
    start_local_ray,
    stop_local_ray,
)
from jigsaw.model.hardware import preset
from jigsaw.oracle import Oracle

PLACEMENT = ((0, 0), (0, 1))
PLAN = spb_plan((0, 2))
MODEL, BATCH = "digits_cnn", 32


def exclusive(root: Path, iterations: int, rep: int) -> float:
    """Seconds to train job A alone, then job B alone (startup excluded)."""
    total = 0.0
    for name in ("a", "b"):
        runner = executor(root / f"x{rep}{name}", lease_iterations=50)
        try:
            runs = run_jobs(runner, [(job(f"x{rep}{name}", iterations), PLACEMENT, PLAN)])
        finally:
            runner.shutdown()
        total += next(iter(runs.values())).training_s
    return total


def packed(root: Path, iterations: int, rep: int) -> float:
    """Seconds from both jobs training to both finished, sharing the same two GPUs."""
    runner = executor(root / f"p{rep}", lease_iterations=50)
    try:
        runs = run_jobs(
            runner,
            [(job(f"p{rep}{name}", iterations), PLACEMENT, PLAN) for name in ("a", "b")],
        )
    finally:
        runner.shutdown()
    started = max(r.started_at or 0.0 for r in runs.values())
    finished = max(r.finished_at or 0.0 for r in runs.values())
    evals = max(float(r.metrics.get("eval_s", 0.0)) for r in runs.values())
    return finished - started - evals


def oracle_ratio() -> dict[str, Any]:
    oracle = Oracle(preset("v100"))
    plan = PLAN
    alone = oracle.predict(MODEL, BATCH, plan, PLACEMENT)
    other = oracle.gpu_loads(MODEL, BATCH, plan, PLACEMENT)
    shared = oracle.predict(MODEL, BATCH, plan, PLACEMENT, gpu_load=other)
    # Exclusive: one job at a time at 1/alone it/s. Packed: two jobs at 1/shared it/s each.
    return {
        "hardware": "v100",
        "alone_iteration_s": alone.iteration_time_s,
        "packed_iteration_s": shared.iteration_time_s,
        "gpu_load_of_one_job": {str(list(g)): load for g, load in other.items()},
        "packed_over_exclusive_throughput": 2 * alone.iteration_time_s / shared.iteration_time_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--repetitions", type=int, default=4)
    args = parser.parse_args()
    temp_dir = start_local_ray()
    runs: list[dict[str, float]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="jrb-ckpt-") as root:
            for rep in range(args.repetitions):
                alone_s = exclusive(Path(root), args.iterations, rep)
                shared_s = packed(Path(root), args.iterations, rep)
                runs.append(
                    {
                        "exclusive_s": alone_s,
                        "packed_s": shared_s,
                        "exclusive_iterations_per_s": 2 * args.iterations / alone_s,
                        "packed_iterations_per_s": 2 * args.iterations / shared_s,
                        "packed_over_exclusive": alone_s / shared_s,
                    }
                )
    finally:
        stop_local_ray(temp_dir)
    measured = median(r["packed_over_exclusive"] for r in runs)
    predicted = oracle_ratio()
    ratio = predicted["packed_over_exclusive_throughput"]
    print(
        json.dumps(
            {
                "benchmark": "runtime_packing",
                "jobs": {
                    "model": MODEL,
                    "workers": 2,
                    "plan": list(PLAN),
                    "batch_size": BATCH,
                    "iterations_each": args.iterations,
                    "placement": [list(g) for g in PLACEMENT],
                },
                "measured": {
                    "packed_over_exclusive_throughput": measured,
                    "statistic": "median over repetitions (exclusive and packed interleaved)",
                    "packed_over_exclusive_min": min(r["packed_over_exclusive"] for r in runs),
                    "packed_over_exclusive_max": max(r["packed_over_exclusive"] for r in runs),
                    "exclusive_iterations_per_s": fmean(
                        r["exclusive_iterations_per_s"] for r in runs
                    ),
                    "packed_iterations_per_s": fmean(r["packed_iterations_per_s"] for r in runs),
                    "runs": runs,
                },
                "oracle": predicted,
                "oracle_error": {
                    "absolute": ratio - measured,
                    "relative": (ratio - measured) / measured,
                },
                "note": "CPU-only box: GPUs are logical; packing is CPU time-sharing of "
                "4 processes on 2 shared cores. The oracle models V100s.",
                "provenance": provenance(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
