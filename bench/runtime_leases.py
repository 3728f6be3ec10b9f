"""Lease overhead of the Ray runtime: control-plane time per lease as a fraction of iteration
time, for several lease lengths, side by side with a no-lease baseline in one run.

Each configuration trains the same job (digits_cnn, 2 workers, staircase plan (0, 2), batch
32) on a private local Ray. Per lease, every rank accounts for its wall time: time inside the
engine's ``step`` calls vs the rest (agreeing at control points, assembling the report, idle
time between leases). The baseline is one lease covering the whole job with no control
points after its first iteration; its end-to-end iteration rate is the reference for the
others' rates. Configurations are interleaved over repetitions so machine noise hits them all.

    python -m bench.runtime_leases            # prints one JSON object
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from statistics import fmean
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

NEVER = 10**9
CONFIGS: dict[str, dict[str, int]] = {
    "baseline_no_leases": {"lease_iterations": NEVER, "control_every": NEVER},
    "k=50": {"lease_iterations": 50, "control_every": 25},
    "k=10": {"lease_iterations": 10, "control_every": 10},
    "k=1": {"lease_iterations": 1, "control_every": 25},
}
PLACEMENT = ((0, 0), (0, 1))
PLAN = spb_plan((0, 2))


def measure(name: str, iterations: int, rep: int, root: Path, checkpoint: bool) -> dict[str, Any]:
    settings: dict[str, Any] = dict(CONFIGS[name])
    settings["checkpoint_every_leases"] = 1 if checkpoint else NEVER
    runner = executor(root / f"{name}-{rep}", **settings)
    try:
        run = run_jobs(runner, [(job(f"lease-{rep}", iterations), PLACEMENT, PLAN)])
    finally:
        runner.shutdown()
    (result,) = run.values()
    steps = sum(lease["steps_wall_s"] for lease in result.leases)
    overhead = sum(lease["lease_overhead_s"] for lease in result.leases)
    control = sum(lease["control_s"] for lease in result.leases)
    saved = sum(lease["checkpoint_s"] for lease in result.leases)
    return {
        "leases": len(result.leases),
        "iterations_per_s": iterations / result.training_s,
        "overhead_fraction": overhead / steps,
        "overhead_per_lease_s": overhead / len(result.leases),
        "control_point_fraction": control / steps,
        "checkpoint_fraction": saved / steps,
        "mean_iteration_s": steps / iterations,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--repetitions", type=int, default=2)
    args = parser.parse_args()
    temp_dir = start_local_ray()
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in CONFIGS}
    samples["k=50 + checkpoint every lease"] = []
    try:
        with tempfile.TemporaryDirectory(prefix="jrb-ckpt-") as root:
            for rep in range(args.repetitions):
                for name in CONFIGS:
                    samples[name].append(measure(name, args.iterations, rep, Path(root), False))
                samples["k=50 + checkpoint every lease"].append(
                    measure("k=50", args.iterations, rep + 100, Path(root), True)
                )
    finally:
        stop_local_ray(temp_dir)
    baseline_rate = fmean(s["iterations_per_s"] for s in samples["baseline_no_leases"])
    summary = {}
    for name, runs in samples.items():
        rate = fmean(s["iterations_per_s"] for s in runs)
        summary[name] = {
            "leases_per_run": runs[0]["leases"],
            "overhead_fraction": fmean(s["overhead_fraction"] for s in runs),
            "overhead_per_lease_ms": 1000 * fmean(s["overhead_per_lease_s"] for s in runs),
            "control_point_fraction": fmean(s["control_point_fraction"] for s in runs),
            "checkpoint_fraction": fmean(s["checkpoint_fraction"] for s in runs),
            "mean_iteration_ms": 1000 * fmean(s["mean_iteration_s"] for s in runs),
            "iterations_per_s": rate,
            "rate_vs_baseline": rate / baseline_rate,
            "runs": runs,
        }
    print(
        json.dumps(
            {
                "benchmark": "runtime_leases",
                "job": {
                    "model": "digits_cnn",
                    "workers": 2,
                    "plan": list(PLAN),
                    "batch_size": 32,
                    "iterations": args.iterations,
                },
                "target": "overhead_fraction <= 0.01 at k=50",
                "configs": summary,
                "provenance": provenance(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
