"""Cluster-level gain: jigsaw vs fifo, las and maxmin on the same trace, seed and rates.

Workloads (``--workloads``, comma-separated; each name may carry a load factor, ``pollux3@2``):

- ``pollux1`` .. ``pollux8``: Pollux workload-N on 64 GPUs (16 nodes x 4). ``@2`` replays it
  at 2.0x load: every arrival time divided by 2. ``pollux`` means all eight at 1.0x and 2.0x;
- ``window``: the busiest 14 days of Philly on 256 GPUs (32 x 8). Rule: of all windows of 14
  consecutive calendar days, the one with the most GPU-time (``gpu_time``) submitted;
- ``philly``: every Philly job on 512 GPUs (64 x 8).

Rows: fifo, las, maxmin; jigsaw (its default fairness guard, ``JigsawConfig.base``);
``jigsaw-<other base>`` (the same with the other guard); and three ablations of jigsaw:
``jigsaw-nopack`` (never shares a GPU), ``jigsaw-noguard`` (packs on summed normalised
goodput alone, without the completion-rate guard) and ``jigsaw-eta1`` (every SPB plan priced
and run at eta = 1: what packing is worth when SPB costs nothing). Columns: avg/p50/p99 JCT,
makespan, utilization, cluster efficiency, preemptions, re-plans (and per job-hour), packed
starts, the share of busy GPU-time that was time-sliced (a second gang on the GPU).

The ceiling, per workload: the GPU-time SPB could free at the jobs' eta. For a job of N >= 2
workers and ``spb: auto`` that runs D seconds with full backprop, a plan p keeps its GPUs
busy ``sum_r load_r(p)`` GPUs' worth for ``D * (T_p / T_full) / eta_p`` seconds (it needs
1 / eta_p times the iterations); what it frees against full backprop is
``D * sum_r load_r(full) - D_p * sum_r load_r(p)``, at best over p, never below 0. Captured:
the GPU compute seconds guests used on GPUs they shared with a larger gang
(``guest_compute_gpu_s``, from the time-slicing model), as a share of the ceiling.

    .venv/bin/python bench/sim_gain.py --workloads pollux         # 16 replays x 8 rows
    .venv/bin/python bench/sim_gain.py --workloads window          # long (tens of minutes)
    .venv/bin/python bench/sim_gain.py --workloads pollux --eta curve

``--eta curve``: gangs progress at the eta of their application's Pollux validation curve at
their progress (jigsaw/simulator/curve_rates.py; Philly jobs get an application by
``philly_app``), and report the curve's gradient statistics as lease reports, so the policy
prices a job's plans with that eta once the job has run (before, with the oracle's table).
``jigsaw-eta1`` stays at eta = 1.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sim_common import shared_traces

from jigsaw.cluster import Cluster
from jigsaw.domain import Job
from jigsaw.oracle import Oracle
from jigsaw.policies.jigsaw import BASES, JigsawConfig
from jigsaw.policies.plans import PlanCatalog
from jigsaw.simulator import SimulationSetup, UnitEfficiency, load_jobs, make_oracle, make_rates
from jigsaw.simulator.curve_rates import CurveEtaRate
from jigsaw.simulator.rates import ReferenceRate
from jigsaw.simulator.replay import Replay, ReplayOptions
from jigsaw.simulator.run import curve_eta_source, make_policy
from jigsaw.simulator.workload import Arrival

BASELINES = ("fifo", "las", "maxmin")
WINDOW_DAYS = 14
COLUMNS = (
    "avg_jct_s",
    "p50_jct_s",
    "p99_jct_s",
    "makespan_s",
    "utilization",
    "cluster_efficiency",
    "preemptions",
    "replans",
    "packed_starts",
)


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    trace: Path
    gpus: int
    gpus_per_node: int
    load: float = 1.0
    window: tuple[tuple[str, Any], ...] = ()
    rule: str | None = None


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


def workload(name: str) -> list[Workload]:
    traces = shared_traces()
    base, _, factor = name.partition("@")
    load = float(factor) if factor else 1.0
    if base == "pollux":
        return [w for n in range(1, 9) for f in (1.0, 2.0) for w in workload(f"pollux{n}@{f}")]
    if base.startswith("pollux") and base[6:].isdigit():
        path = traces / "pollux" / "workloads" / f"workload-{base[6:]}.csv"
        if not path.exists():
            raise SystemExit(f"no Pollux workload {path}")
        return [Workload(f"{base}@{load:g}x", path, 64, 4, load)]
    philly = traces / "philly.csv"
    if base == "window":
        start, end = busiest_window(philly)
        return [
            Workload(
                f"window@{load:g}x",
                philly,
                256,
                8,
                load,
                (("start", start), ("end", end)),
                f"{WINDOW_DAYS} consecutive days with the most GPU-time submitted",
            )
        ]
    if base == "philly":
        return [Workload(f"philly@{load:g}x", philly, 512, 8, load)]
    raise SystemExit(f"unknown workload {name!r}; choose pollux, pollux1..8, window, philly")


def scaled(arrivals: list[Arrival], load: float) -> list[Arrival]:
    """Arrivals at ``load`` x the trace's rate: times divided by ``load`` from the first."""
    if load == 1.0 or not arrivals:
        return arrivals
    first = min(a.at for a in arrivals)
    return [replace(a, at=first + (a.at - first) / load) for a in arrivals]


def prepared(
    spec: Workload, setup: SimulationSetup, oracle: Oracle
) -> tuple[ReferenceRate, list[Arrival]]:
    jobs = load_jobs(spec.trace, setup, oracle, **dict(spec.window))
    rates, arrivals = make_rates(jobs, setup, oracle)
    return rates, scaled(arrivals, spec.load)


def run_row(
    label: str,
    policy: str,
    arrivals: list[Arrival],
    rates: ReferenceRate,
    oracle: Oracle,
    setup: SimulationSetup,
    options: dict[str, Any],
) -> dict[str, Any]:
    cluster = Cluster.uniform(
        setup.gpus,
        setup.gpus_per_node,
        gpu_memory_bytes=oracle.hardware.memory_bytes,
        gpu_type=oracle.hardware.name,
    )
    replay = Replay(
        arrivals,
        make_policy(policy, oracle, **options),
        rates,
        cluster,
        ReplayOptions(round_s=setup.round_s, overheads=setup.overheads),
    )
    started = time.perf_counter()
    result = replay.run()
    summary = result.summary
    row: dict[str, Any] = {"policy": label, "completed": summary["completed"]}
    row.update({key: summary[key] for key in COLUMNS})
    busy = result.timeline.area_until(result.last_finish)
    guest = replay.executor.guest_gpu_seconds
    job_hours = (
        math.fsum(j.attained_gpu_seconds / j.spec.workers for j in result.store.all_jobs()) / 3600.0
    )
    row["replans_per_job_hour"] = summary["replans"] / job_hours if job_hours > 0 else 0.0
    row["guest_gpu_s"] = guest
    row["guest_compute_gpu_s"] = replay.executor.guest_compute_seconds
    row["packed_share"] = guest / (busy + guest) if busy + guest > 0 else 0.0
    row["wall_s"] = time.perf_counter() - started
    return row


def ceiling_gpu_s(
    arrivals: list[Arrival], rates: ReferenceRate, oracle: Oracle
) -> tuple[float, float]:
    """GPU-seconds SPB could free at the jobs' eta (module docstring), and the workload's
    GPU-seconds of full-backprop work, for scale."""
    catalog = PlanCatalog(oracle)
    total = work = 0.0
    for arrival in arrivals:
        work += (
            arrival.spec.iterations
            / rates.reference_rate(Job(arrival.job_id, arrival.spec, submitted_at=arrival.at))
            * arrival.spec.workers
        )
        spec = arrival.spec
        if spec.workers < 2 or not spec.plan_request.is_auto:
            continue
        job = Job(arrival.job_id, spec, submitted_at=arrival.at)
        options = catalog.options(job)
        full = next((o for o in options if o.is_full_backprop), None)
        if full is None or full.goodput <= 0:
            continue
        seconds = spec.iterations / rates.reference_rate(job)
        busy_full = seconds * sum(full.loads)
        best = 0.0
        for option in options:
            if option.is_full_backprop or option.goodput <= 0:
                continue
            # goodput = eta / T: D_p = D * (T_p / T_full) / eta_p = D * goodput_full / goodput_p
            seconds_p = seconds * full.goodput / option.goodput
            best = max(best, busy_full - seconds_p * sum(option.loads))
        total += best
    return total, work


ROWS = (
    "fifo",
    "las",
    "maxmin",
    "jigsaw",
    "jigsaw-other",
    "jigsaw-nopack",
    "jigsaw-noguard",
    "jigsaw-eta1",
)
"""Row names for ``--rows``; ``jigsaw-other`` is jigsaw with the other fairness guard."""


def run_workload(
    spec: Workload, round_s: float, eta: str = "table", rows_wanted: tuple[str, ...] = ROWS
) -> dict[str, Any]:
    setup = SimulationSetup(
        gpus=spec.gpus,
        gpus_per_node=spec.gpus_per_node,
        round_s=round_s,
        eta=eta,
        curves_dir=shared_traces() / "pollux" / "apps",
    )
    oracle = make_oracle(setup)
    rates, arrivals = prepared(spec, setup, oracle)
    default = JigsawConfig()
    other = next(b for b in BASES if b != default.base)
    rows = [
        run_row(p, p, arrivals, rates, oracle, setup, {})
        for p in (*BASELINES, "jigsaw")
        if p in rows_wanted
    ]
    ablations = {
        "jigsaw-other": (f"jigsaw-{other}", {"config": JigsawConfig(base=other)}),
        "jigsaw-nopack": ("jigsaw-nopack", {"config": JigsawConfig(packing=False)}),
        "jigsaw-noguard": ("jigsaw-noguard", {"config": JigsawConfig(completion_guard=False)}),
    }
    for key, (label, options) in ablations.items():
        if key in rows_wanted:
            rows.append(run_row(label, "jigsaw", arrivals, rates, oracle, setup, options))
    if "jigsaw-eta1" in rows_wanted:
        unit = make_oracle(setup, efficiency=UnitEfficiency())
        unit_rates, unit_arrivals = prepared(spec, replace(setup, eta="table"), unit)
        rows.append(run_row("jigsaw-eta1", "jigsaw", unit_arrivals, unit_rates, unit, setup, {}))
    by_policy = {row["policy"]: row for row in rows}
    ceiling, work = ceiling_gpu_s(arrivals, rates, oracle)
    summary = {
        "workload": spec.name,
        "trace": spec.trace.name,
        "gpus": spec.gpus,
        "gpus_per_node": spec.gpus_per_node,
        "load": spec.load,
        "selection": dict(spec.window),
        "rule": spec.rule,
        "jobs": len(arrivals),
        "eta_source": curve_eta_source(rates)
        if isinstance(rates, CurveEtaRate)
        else oracle.efficiency.origin,
        "results": rows,
        "ceiling": {"spb_freeable_gpu_s": ceiling, "work_gpu_s": work},
    }
    if "jigsaw" not in by_policy or not all(p in by_policy for p in BASELINES):
        return summary  # a subset of rows (--rows): the comparisons need them all
    jigsaw = by_policy["jigsaw"]
    best = min(BASELINES, key=lambda p: by_policy[p]["avg_jct_s"])
    base = by_policy[default.base]
    return {
        **summary,
        "ceiling": {
            "spb_freeable_gpu_s": ceiling,
            "work_gpu_s": work,
            "captured_gpu_s": jigsaw["guest_compute_gpu_s"],
            "captured_share": jigsaw["guest_compute_gpu_s"] / ceiling if ceiling > 0 else None,
        },
        "jigsaw_vs_best_baseline": {
            "baseline": best,
            "avg_jct_reduction": 1.0 - jigsaw["avg_jct_s"] / by_policy[best]["avg_jct_s"],
        },
        "jigsaw_vs_own_base": {
            "base": default.base,
            "avg_jct_reduction": 1.0 - jigsaw["avg_jct_s"] / base["avg_jct_s"],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="pollux")
    parser.add_argument("--round-seconds", type=float, default=60.0)
    parser.add_argument(
        "--eta",
        choices=("table", "curve"),
        default="table",
        help="eta the gangs progress at: the oracle's table or the Pollux "
        "application curves over training",
    )
    parser.add_argument(
        "--rows",
        default=",".join(ROWS),
        help=f"comma-separated subset of {', '.join(ROWS)} (default: all)",
    )
    args = parser.parse_args()
    rows_wanted = tuple(r.strip() for r in args.rows.split(",") if r.strip())
    unknown = sorted(set(rows_wanted) - set(ROWS))
    if unknown:
        parser.error(f"unknown rows {', '.join(unknown)}; choose from {', '.join(ROWS)}")
    specs = [
        w for name in args.workloads.split(",") if name.strip() for w in workload(name.strip())
    ]
    started = time.perf_counter()
    report = [run_workload(spec, args.round_seconds, args.eta, rows_wanted) for spec in specs]
    print(
        json.dumps(
            {
                "bench": "sim_gain",
                "round_s": args.round_seconds,
                "eta": args.eta,
                "rows": list(rows_wanted),
                "wall_s": time.perf_counter() - started,
                "workloads": report,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
