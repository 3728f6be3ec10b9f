"""Gavel traces under Gavel's semantics: fifo vs max-min, side by side, with the ratio.

Replays Gavel's shipped traces with its throughput table (v100) under Gavel's semantics
(chosen because ``--throughputs`` is given; docs/SCHEDULER.md "Gavel traces"): 360 s rounds
that end with their last gang, no restart cost, no protection, no reservation. Prints one
JSON object; ``maxmin_over_fifo`` < 1 means max-min gives the shorter average JCT.

    .venv/bin/python bench/sim_gavel_fidelity.py            # all cases (~2 min)
"""

from __future__ import annotations

import argparse
import json
import time

from sim_common import shared_traces

from jigsaw.simulator import SimulationSetup, load_jobs, make_oracle, make_rates, replay
from jigsaw.simulator.semantics import GAVEL

CASES = (
    ("small_test", 4),
    ("small_test", 16),
    ("max_min_fairness", 4),
    ("max_min_fairness", 16),
    ("max_min_fairness", 64),
    ("generated_2000", 64),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="fifo,maxmin")
    parser.add_argument("--cases", default=",".join(f"{t}:{g}" for t, g in CASES))
    parser.add_argument("--gpus-per-node", type=int, default=4)
    args = parser.parse_args()
    traces = shared_traces() / "gavel"
    rows = []
    started = time.perf_counter()
    for case in args.cases.split(","):
        name, gpus = case.split(":")
        setup = SimulationSetup(
            gpus=int(gpus),
            gpus_per_node=args.gpus_per_node,
            round_s=GAVEL.round_s,
            throughputs=traces / "simulation_throughputs.json",
            worker_type="v100",
        )
        oracle = make_oracle(setup)
        trace = traces / f"{name}.trace"
        jobs = load_jobs(trace, setup, oracle)
        rates, arrivals = make_rates(jobs, setup, oracle, trace)
        row: dict[str, object] = {"trace": name, "gpus": int(gpus), "jobs": len(arrivals)}
        for policy in args.policies.split(","):
            summary = replay(arrivals, policy, rates, oracle, setup, semantics=GAVEL).summary
            row[policy] = {
                "avg_jct_s": round(summary["avg_jct_s"], 1),
                "p50_jct_s": round(summary["p50_jct_s"], 1),
                "makespan_s": round(summary["makespan_s"], 1),
                "utilization": round(summary["utilization"], 3),
                "completed": summary["completed"],
                "preemptions": summary["preemptions"],
                "wall_s": round(summary["wall_s"], 2),
            }
        if {"fifo", "maxmin"} <= set(row):
            fifo, maxmin = row["fifo"], row["maxmin"]
            assert isinstance(fifo, dict) and isinstance(maxmin, dict)
            row["maxmin_over_fifo"] = round(maxmin["avg_jct_s"] / fifo["avg_jct_s"], 3)
        rows.append(row)
    print(
        json.dumps(
            {
                "bench": "sim_gavel_fidelity",
                "semantics": "gavel",
                "worker_type": "v100",
                "round_s": GAVEL.round_s,
                "gpus_per_node": args.gpus_per_node,
                "wall_s": round(time.perf_counter() - started, 1),
                "rows": rows,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
