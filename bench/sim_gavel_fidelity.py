"""Gavel traces under Gavel's semantics: ours vs Gavel's own simulator, with the ratio.

Replays Gavel's shipped traces with its throughput table (v100) under Gavel's semantics
(chosen because ``--throughputs`` is given; docs/SCHEDULER.md "Gavel traces"): 360 s rounds
of whole steps that end with their last gang, allocation resets at least 1,920 s apart, no
restart cost, no protection, no reservation. Each average JCT is divided by the figure of
Gavel's own simulator for the same trace, cluster size and policy (fifo; maxmin =
``max_min_fairness``), held in ``gavel_reference.json`` beside this file with the commands
and commit that produced it (the peer is not installed here). Gavel drops a few jobs without
a completion time (``failed_trace_lines`` there); ``avg_jct_s`` and ``over_gavel`` leave the
same jobs out, ``avg_jct_all_s`` counts every job. In Gavel those jobs also hold their gang
for five futile rounds before they are dropped; ``over_gavel_held`` replays them with five
rounds of work in place of their last steps, to show what that costs the others. Prints one
JSON object.

    .venv/bin/python -m bench.sim_gavel_fidelity            # all cases (~1 min)
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.sim_common import shared_traces
from jigsaw.simulator import (
    GavelRate,
    SimulationSetup,
    load_jobs,
    make_oracle,
    make_rates,
    replay,
)
from jigsaw.simulator.semantics import GAVEL
from jigsaw.simulator.workload import Arrival

REFERENCE = Path(__file__).resolve().parent / "gavel_reference.json"
GAVEL_FUTILE_ROUNDS = 5
"""Gavel's ``MAX_FAILED_ATTEMPTS``: failed micro-tasks (rounds) before it drops a job."""


def reference_rows() -> dict[tuple[str, int], dict[str, Any]]:
    rows = json.loads(REFERENCE.read_text())["rows"]
    return {(row["trace"], row["gpus"]): row for row in rows}


def average_jct(jobs: list[Any], dropped: set[str]) -> float:
    jcts = [
        job.finished_at - job.submitted_at
        for job in jobs
        if job.finished_at is not None and job.id not in dropped
    ]
    return math.fsum(jcts) / len(jcts) if jcts else math.nan


def holding_dropped(arrivals: list[Arrival], dropped: set[str], rates: GavelRate) -> list[Arrival]:
    """The jobs Gavel drops end with five full rounds of work instead of their last steps."""
    held = []
    for arrival in arrivals:
        if arrival.job_id in dropped:
            per_round = math.floor(
                rates.throughputs.steps_per_second(
                    rates.worker_type, arrival.trace.original_model or "", arrival.spec.workers
                )
                * GAVEL.round_s
            )
            steps = arrival.spec.iterations
            steps += GAVEL_FUTILE_ROUNDS * per_round - steps % per_round
            arrival = replace(arrival, spec=replace(arrival.spec, iterations=steps))
        held.append(arrival)
    return held


def main() -> None:
    reference = reference_rows()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="fifo,maxmin")
    parser.add_argument("--cases", default=",".join(f"{t}:{g}" for t, g in reference))
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
        peer = reference.get((name, int(gpus)), {})
        row: dict[str, object] = {"trace": name, "gpus": int(gpus), "jobs": len(arrivals)}
        for policy in args.policies.split(","):
            result = replay(arrivals, policy, rates, oracle, setup, semantics=GAVEL)
            summary = result.summary
            gavel = peer.get(policy)
            dropped = {f"gavel-{line:06d}" for line in (gavel or {}).get("failed_trace_lines", [])}
            avg = average_jct(result.store.all_jobs(), dropped)
            figures: dict[str, object] = {
                "avg_jct_s": round(avg, 1),
                "avg_jct_all_s": round(summary["avg_jct_s"], 1),
                "makespan_s": round(summary["makespan_s"], 1),
                "utilization": round(summary["utilization"], 3),
                "completed": summary["completed"],
                "preemptions": summary["preemptions"],
                "wall_s": round(summary["wall_s"], 2),
            }
            if gavel is not None:
                figures["gavel_avg_jct_s"] = gavel["avg_jct_s"]
                figures["gavel_makespan_s"] = gavel["makespan_s"]
                figures["gavel_preemptions"] = gavel["preemptions"]
                figures["over_gavel"] = round(avg / gavel["avg_jct_s"], 3)
                if dropped:
                    assert isinstance(rates, GavelRate)
                    held = replay(
                        holding_dropped(arrivals, dropped, rates),
                        policy,
                        rates,
                        oracle,
                        setup,
                        semantics=GAVEL,
                    )
                    held_avg = average_jct(held.store.all_jobs(), dropped)
                    figures["over_gavel_held"] = round(held_avg / gavel["avg_jct_s"], 3)
                    figures["makespan_held_s"] = round(held.summary["makespan_s"], 1)
            row[policy] = figures
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
                "reference": REFERENCE.name,
                "wall_s": round(time.perf_counter() - started, 1),
                "rows": rows,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
