"""Pollux workloads under Pollux's semantics vs Pollux's own simulator (Tiresias baseline).

Replays every workload of ``pollux/workloads*/`` (job loads 0.5x, 1.0x, 1.5x, 2.0x) under
our ``las`` with Pollux's semantics (chosen by the trace format; docs/SCHEDULER.md) on 64
GPUs (16 nodes x 4, 60 s interval) and compares each average JCT with the figure Pollux's
simulator gives for its Tiresias baseline on the same workload. Prints one JSON object.

    .venv/bin/python bench/sim_pollux_fidelity.py              # all 32 workloads (~1 min)
    .venv/bin/python bench/sim_pollux_fidelity.py --loads 1.0  # the 8 at 1.0x
"""

from __future__ import annotations

import argparse
import json
import math
import time

from sim_common import shared_traces

from jigsaw.simulator import SimulationSetup, load_jobs, make_oracle, make_rates, replay
from jigsaw.simulator.semantics import semantics_for

REFERENCE_AVG_JCT_S: dict[str, dict[int, float]] = {
    # Average JCT (s) of Pollux's simulator, Tiresias policy, 16 nodes x 4 GPUs, 60 s interval:
    # petuum/adaptdl, branch osdi21-artifact (commit de25dcc9), files
    # simulator/results-jobload/tiresias-<load>/summary.json, key "avgs" (Apache-2.0).
    "0.5": {
        1: 1450.9375,
        2: 2333.275,
        3: 1869.9,
        4: 1946.7625,
        5: 1425.3875,
        6: 1826.575,
        7: 3979.15,
        8: 1899.95,
    },
    "1.0": {
        1: 2473.65,
        2: 5144.9625,
        3: 3876.25625,
        4: 3280.2625,
        5: 3501.0125,
        6: 3469.69375,
        7: 5479.9125,
        8: 5079.70625,
    },
    "1.5": {
        1: 5520.291666666667,
        2: 6333.770833333333,
        3: 6561.979166666667,
        4: 5577.320833333333,
        5: 6832.420833333334,
        6: 5830.483333333334,
        7: 5366.783333333334,
        8: 7435.75,
    },
    "2.0": {
        1: 10138.175,
        2: 8655.990625,
        3: 10727.81875,
        4: 9664.728125,
        5: 12098.103125,
        6: 10254.66875,
        7: 8370.846875,
        8: 10405.80625,
    },
}
DIRECTORY = {
    "0.5": "workloads-0.5",
    "1.0": "workloads",
    "1.5": "workloads-1.5",
    "2.0": "workloads-2.0",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", default="0.5,1.0,1.5,2.0")
    parser.add_argument("--policy", default="las")
    args = parser.parse_args()
    setup = SimulationSetup(gpus=64, gpus_per_node=4, round_s=60.0)
    oracle = make_oracle(setup)
    rows = []
    started = time.perf_counter()
    for load in args.loads.split(","):
        for number, reference in sorted(REFERENCE_AVG_JCT_S[load].items()):
            trace = shared_traces() / "pollux" / DIRECTORY[load] / f"workload-{number}.csv"
            jobs = load_jobs(trace, setup, oracle)
            rates, arrivals = make_rates(jobs, setup, oracle, trace)
            result = replay(
                arrivals,
                args.policy,
                rates,
                oracle,
                setup,
                semantics=semantics_for(trace, throughputs=False),
            )
            ours = result.summary["avg_jct_s"]
            rows.append(
                {
                    "load": load,
                    "workload": number,
                    "jobs": result.summary["jobs"],
                    "completed": result.summary["completed"],
                    "ours_avg_jct_s": round(ours, 1),
                    "pollux_avg_jct_s": round(reference, 1),
                    "ratio": round(ours / reference, 3),
                    "preemptions": result.summary["preemptions"],
                    "utilization": round(result.summary["utilization"], 3),
                }
            )
    ratios = [row["ratio"] for row in rows]
    by_load = {
        load: round(
            math.exp(
                sum(math.log(r["ratio"]) for r in rows if r["load"] == load)
                / max(1, sum(r["load"] == load for r in rows))
            ),
            3,
        )
        for load in args.loads.split(",")
    }
    print(
        json.dumps(
            {
                "bench": "sim_pollux_fidelity",
                "policy": args.policy,
                "gpus": 64,
                "gpus_per_node": 4,
                "semantics": "pollux",
                "wall_s": round(time.perf_counter() - started, 1),
                "geomean_ratio_by_load": by_load,
                "max_abs_error": round(max(abs(r - 1) for r in ratios), 3),
                "within_20pct": sum(abs(r - 1) <= 0.2 for r in ratios),
                "workloads": len(rows),
                "rows": rows,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
