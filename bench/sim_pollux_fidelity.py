"""Pollux workloads under Pollux's semantics vs Pollux's own simulator: our las against its
Tiresias baseline, our pollux against its Pollux policy.

Replays every workload of ``pollux/workloads*/`` (job loads 0.5x, 1.0x, 1.5x, 2.0x) through
the CLI's code path (the trace format chooses Pollux's semantics; docs/SCHEDULER.md) on 64
GPUs (16 nodes x 4, 60 s interval) and compares each average JCT with the figure Pollux's
simulator gives for the same policy on the same workload. Prints one JSON object.

    .venv/bin/python -m bench.sim_pollux_fidelity                        # las, all 32 (~1 min)
    .venv/bin/python -m bench.sim_pollux_fidelity --policy las,pollux --loads 1.0,2.0
"""

from __future__ import annotations

import argparse
import json
import math
import time

from bench.sim_common import shared_traces
from jigsaw.simulator import SimulationSetup, load_jobs, make_oracle, make_rates, replay
from jigsaw.simulator.semantics import semantics_for

TIRESIAS_AVG_JCT_S: dict[str, dict[int, float]] = {
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
POLLUX_AVG_JCT_S: dict[str, dict[int, float]] = {
    # The same for the Pollux policy: simulator/results-jobload/pollux-<load>/summary.json
    # (same commit). Its README gives workload-6 at 1.0x as 2,446 s.
    "0.5": {
        1: 1059.5125,
        2: 1826.2625,
        3: 1310.525,
        4: 1497.7625,
        5: 976.8375,
        6: 1287.825,
        7: 2881.05,
        8: 1432.0375,
    },
    "1.0": {
        1: 2088.76875,
        2: 3322.94375,
        3: 2188.49375,
        4: 2720.98125,
        5: 2673.7,
        6: 2446.13125,
        7: 3616.14375,
        8: 2951.90625,
    },
    "1.5": {
        1: 3855.7791666666667,
        2: 3380.579166666667,
        3: 3299.9166666666665,
        4: 3902.675,
        5: 4007.3,
        6: 3474.266666666667,
        7: 3217.6291666666666,
        8: 4345.116666666667,
    },
    "2.0": {
        1: 6186.259375,
        2: 4190.828125,
        3: 5131.8375,
        4: 5262.4,
        5: 6590.821875,
        6: 5105.3125,
        7: 3836.325,
        8: 6009.8125,
    },
}
REFERENCES = {"las": ("tiresias", TIRESIAS_AVG_JCT_S), "pollux": ("pollux", POLLUX_AVG_JCT_S)}
"""Our policy -> (Pollux's name for its peer, its figures)."""
DIRECTORY = {
    "0.5": "workloads-0.5",
    "1.0": "workloads",
    "1.5": "workloads-1.5",
    "2.0": "workloads-2.0",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", default="0.5,1.0,1.5,2.0")
    parser.add_argument("--policy", default="las", help="las, pollux or both, comma-separated")
    args = parser.parse_args()
    policies = args.policy.split(",")
    unknown = [p for p in policies if p not in REFERENCES]
    if unknown:
        parser.error(f"no reference figures for {unknown[0]!r}; choose from {sorted(REFERENCES)}")
    loads = args.loads.split(",")
    setup = SimulationSetup(gpus=64, gpus_per_node=4, round_s=60.0)
    oracle = make_oracle(setup)
    rows = []
    started = time.perf_counter()
    for load in loads:
        for number in sorted(TIRESIAS_AVG_JCT_S[load]):
            trace = shared_traces() / "pollux" / DIRECTORY[load] / f"workload-{number}.csv"
            jobs = load_jobs(trace, setup, oracle)
            rates, arrivals = make_rates(jobs, setup, oracle, trace)
            for policy in policies:
                peer, figures = REFERENCES[policy]
                reference = figures[load][number]
                result = replay(
                    arrivals,
                    policy,
                    rates,
                    oracle,
                    setup,
                    semantics=semantics_for(trace, throughputs=False),
                )
                ours = result.summary["avg_jct_s"]
                rows.append(
                    {
                        "policy": policy,
                        "peer": peer,
                        "load": load,
                        "workload": number,
                        "jobs": result.summary["jobs"],
                        "completed": result.summary["completed"],
                        "ours_avg_jct_s": round(ours, 1),
                        "pollux_avg_jct_s": round(reference, 1),
                        "ratio": round(ours / reference, 3),
                        "preemptions": result.summary["preemptions"],
                        "resizes": result.log.counts["resize"],
                        "utilization": round(result.summary["utilization"], 3),
                        "wall_s": round(result.summary["wall_s"], 1),
                    }
                )
    summary = {}
    for policy in policies:
        mine = [r for r in rows if r["policy"] == policy]
        summary[policy] = {
            "peer": REFERENCES[policy][0],
            "geomean_ratio_by_load": {
                load: _geomean([r["ratio"] for r in mine if r["load"] == load]) for load in loads
            },
            "max_abs_error": round(max(abs(r["ratio"] - 1) for r in mine), 3),
            "within_10pct": sum(abs(r["ratio"] - 1) <= 0.1 for r in mine),
            "within_20pct": sum(abs(r["ratio"] - 1) <= 0.2 for r in mine),
            "workloads": len(mine),
        }
    print(
        json.dumps(
            {
                "bench": "sim_pollux_fidelity",
                "gpus": 64,
                "gpus_per_node": 4,
                "semantics": "pollux",
                "wall_s": round(time.perf_counter() - started, 1),
                "policies": summary,
                "rows": rows,
            },
            indent=2,
        )
    )


def _geomean(ratios: list[float]) -> float:
    return round(math.exp(sum(math.log(r) for r in ratios) / max(1, len(ratios))), 3)


if __name__ == "__main__":
    main()
