"""Cluster-level gain: jigsaw vs fifo, las and maxmin on the same trace and seed.

Workloads (``--workloads``, comma-separated):

- ``philly``: every Philly job on 512 GPUs;
- ``window``: the busiest 14 days of Philly on 256 GPUs. Rule: of all windows of 14
  consecutive calendar days, the one with the most GPU-time (``gpu_time``) submitted;
- ``pollux6``: Pollux workload-6 on 64 GPUs.

Besides the four policies, two ablations of jigsaw say where its gain comes from:
``jigsaw-nopack`` (never shares a GPU) and ``jigsaw-eta1`` (every SPB plan as good as full
backprop: the most SPB could give under this oracle). Reported per workload: avg/p50/p99 JCT,
makespan, utilization, cluster efficiency, and jigsaw's ratios against the best baseline.

    .venv/bin/python bench/sim_gain.py                      # all three (hours)
    .venv/bin/python bench/sim_gain.py --quick              # small cuts of each (minutes)
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from sim_common import prepare, run_policy, shared_traces

from jigsaw.policies.jigsaw import JigsawConfig
from jigsaw.simulator import SimulationSetup, UnitEfficiency, make_oracle

BASELINES = ("fifo", "las", "maxmin")
WINDOW_DAYS = 14


def busiest_window(philly: Path, days: int = WINDOW_DAYS) -> tuple[str, str]:
    """[start, end) dates of the ``days`` consecutive days with the most GPU-time submitted."""
    per_day: dict[dt.date, float] = defaultdict(float)
    with philly.open(newline="") as handle:
        for row in csv.DictReader(handle):
            per_day[dt.datetime.fromisoformat(row["timestamp"]).date()] += float(row["gpu_time"])
    first, last = min(per_day), max(per_day)
    best_start, best_total = first, -1.0
    day = first
    while day + dt.timedelta(days=days - 1) <= last:
        total = sum(per_day.get(day + dt.timedelta(days=i), 0.0) for i in range(days))
        if total > best_total:
            best_start, best_total = day, total
        day += dt.timedelta(days=1)
    return best_start.isoformat(), (best_start + dt.timedelta(days=days)).isoformat()


def workloads(quick: bool) -> dict[str, dict[str, Any]]:
    traces = shared_traces()
    philly = traces / "philly.csv"
    start, end = busiest_window(philly)
    return {
        "philly": {"trace": philly, "gpus": 512, "window": {"limit": 4_000 if quick else None}},
        "window": {
            "trace": philly, "gpus": 256 if not quick else 64,
            "window": {"start": start, "end": end, "limit": 1_500 if quick else None},
            "rule": f"{WINDOW_DAYS} consecutive days with the most GPU-time submitted",
        },
        "pollux6": {
            "trace": traces / "pollux" / "workloads" / "workload-6.csv", "gpus": 64,
            "window": {"limit": 60 if quick else None},
        },
    }


def run_workload(name: str, spec: dict[str, Any], round_s: float) -> dict[str, Any]:
    setup = SimulationSetup(gpus=spec["gpus"], gpus_per_node=8, round_s=round_s)
    oracle = make_oracle(setup)
    rates, arrivals = prepare(spec["trace"], setup, oracle, **spec["window"])
    rows = [run_policy(policy, arrivals, rates, oracle, setup) for policy in (*BASELINES,
                                                                                "jigsaw")]
    nopack = SimulationSetup(
        gpus=spec["gpus"], gpus_per_node=8, round_s=round_s,
        policy_options={"jigsaw": {"config": JigsawConfig(packing=False)}},
    )
    rows.append(run_policy("jigsaw", arrivals, rates, oracle, nopack, label="jigsaw-nopack"))
    unit = make_oracle(setup, efficiency=UnitEfficiency())
    unit_rates, _ = prepare(spec["trace"], setup, unit, **spec["window"])
    rows.append(run_policy("jigsaw", arrivals, unit_rates, unit, setup, label="jigsaw-eta1"))
    by_policy = {row["policy"]: row for row in rows}
    jigsaw = by_policy["jigsaw"]
    best_jct = min(BASELINES, key=lambda p: by_policy[p]["avg_jct_s"])
    best_eff = max(BASELINES, key=lambda p: by_policy[p]["cluster_efficiency"])
    return {
        "workload": name,
        "trace": str(spec["trace"].name),
        "gpus": spec["gpus"],
        "selection": {k: v for k, v in spec["window"].items() if v is not None},
        "rule": spec.get("rule"),
        "jobs": len(arrivals),
        "eta_source": oracle.efficiency.origin,
        "results": rows,
        "jigsaw_vs_best_baseline": {
            "avg_jct_baseline": best_jct,
            "avg_jct_reduction": 1.0 - jigsaw["avg_jct_s"] / by_policy[best_jct]["avg_jct_s"],
            "cluster_efficiency_baseline": best_eff,
            "cluster_efficiency_gain": jigsaw["cluster_efficiency"]
            / by_policy[best_eff]["cluster_efficiency"] - 1.0,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="pollux6,window,philly")
    parser.add_argument("--round-seconds", type=float, default=60.0)
    parser.add_argument("--quick", action="store_true", help="small cuts of each workload")
    args = parser.parse_args()
    specs = workloads(args.quick)
    chosen = [name.strip() for name in args.workloads.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in specs]
    if unknown:
        raise SystemExit(f"unknown workload {unknown[0]!r}; choose from {', '.join(specs)}")
    report = [run_workload(name, specs[name], args.round_seconds) for name in chosen]
    print(json.dumps({"bench": "sim_gain", "quick": args.quick, "round_s": args.round_seconds,
                      "workloads": report}, indent=2))


if __name__ == "__main__":
    main()
