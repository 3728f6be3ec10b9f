"""Cluster-level gain: jigsaw against its peers, every figure from ``jigsaw-cli simulate``'s path.

Each row is :func:`jigsaw.simulator.trace_replay.simulate_trace`, the function the CLI calls,
with the trace's own semantics (docs/SCHEDULER.md, "Simulator semantics"): Pollux's workloads
under Pollux's, Philly under jigsaw's. So every cell has a CLI command line that gives the
same figures (``--commands`` prints them).

Workloads (``--workloads``, comma-separated):

- ``pollux1`` .. ``pollux8``: Pollux workload-N on 64 GPUs (16 nodes x 4); ``pollux3@2``
  is ``workloads-2.0/workload-3.csv`` (Pollux's own 2.0x files: 320 jobs, not the 1.0x file
  with its arrivals halved); ``pollux`` means all eight at 1.0x and 2.0x;
- ``philly-low``, ``philly-mid``, ``philly-high``: three Philly fortnights on 256 GPUs
  (32 x 8), ``philly`` all three. How they were chosen: the trace's 14-day windows aligned
  on Mondays from its first day, 2017-09-04; the offered load of a window is the GPU-time
  submitted in it over 14 days x 256 GPUs. The three span that load (about 1.0x, 1.35x and
  2.1x) among the windows of fewer than 11,000 jobs; the two October windows of 22,000 and
  24,000 jobs (the older tables' "busiest fortnight") cost several times more per replay.

Rows (``--rows``): fifo, las, maxmin, timeslice, pollux, jigsaw, and these ablations of
jigsaw's allocator (docs/SCHEDULER.md, "jigsaw"): ``jigsaw-noguests`` (``--policy-options
'{"jigsaw":
{"config": {"guests": false}}}'``: no co-tenancy, pollux's configurations only),
``jigsaw-nohosts`` (``{"hosts": false}``: guests by time-slicing, no SPB host, the
timeslice-like lever), ``jigsaw-noguard`` (``{"completion_guard": false}``: packs held by
the goodput row alone, not by the completion rate), ``jigsaw-oracle``
(``{"knowledge": "oracle"}``: the jobs' reports ignored, every job keeps its size),
``jigsaw-p05`` (``{"fairness_power": -0.5}``, the default since 2026-11-28: the row of the
older files), ``jigsaw-p1`` (``{"fairness_power": -1}``: Pollux's power),
``jigsaw-unweighted`` (``{"service_weight": 0}``: no attained-service weight),
``jigsaw-eta1`` (``--eta one``: every SPB plan priced and run at eta = 1),
``jigsaw-noshortest`` (``{"remaining_weight": 0}``: no work-left weight, the default
until 2026-11-29), ``jigsaw-nolongest`` (``{"protect_longest": false}``: the critical path
not kept running), ``jigsaw-longest-only`` (``{"critical_share": 0}``: only the longest
running job kept on the critical path, none started: the rule of 2026-11-29, session 23),
``jigsaw-nohold`` (``{"critical_hold": 0}``: near-equal critical jobs swap places in the
path's share at every minimum run's end),
``jigsaw-noshortest-nolongest`` (both: the default before) and
``jigsaw-pollux-like`` (no co-tenancy, power -1, neither weight nor pin: Pollux's objective,
which decides as pollux under Pollux's semantics, where launches are charged; the
containment test's configuration). With
``--interference X``, ``jigsaw-interference`` and ``timeslice-interference`` rerun the two
policies that share GPUs with the co-location model losing the share X of every shared rate
(``jigsaw-cli simulate --interference X``), so a reader sees how much of a gain depends on
the model. ``--sharing`` picks the sharing mode of every row (default ``timeslice``).

    .venv/bin/python -m bench.sim_gain --workloads pollux
    .venv/bin/python -m bench.sim_gain --workloads philly --rows fifo,las,maxmin,timeslice,jigsaw
    .venv/bin/python -m bench.sim_gain --table results1.json results2.json   # markdown

Prints one JSON object: per workload its selection, offered load and rows, each with the
CLI's summary figures and the replay's wall time.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import shlex
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.sim_common import shared_traces
from bench.sim_gain_rows import INTERFERENCE_ROWS, PEERS, ROWS
from jigsaw.oracle import SharingSettings
from jigsaw.simulator.trace_replay import simulate_trace, simulation_setup

COLUMNS = (
    "completed",
    "avg_jct_s",
    "p50_jct_s",
    "p99_jct_s",
    "makespan_s",
    "utilization",
    "cluster_efficiency",
    "preemptions",
    "replans",
    "packed_starts",
    "wall_s",
)
WINDOW_DAYS = 14
PHILLY_GPUS = 256
PHILLY_WINDOWS = {
    "philly-low": "2017-11-13",
    "philly-mid": "2017-11-27",
    "philly-high": "2017-09-18",
}


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    trace: Path
    gpus: int
    gpus_per_node: int
    start: str | None = None
    end: str | None = None


def workloads(name: str) -> list[Workload]:
    traces = shared_traces()
    base, _, factor = name.partition("@")
    if base == "pollux":
        return [w for n in range(1, 9) for f in ("1", "2") for w in workloads(f"pollux{n}@{f}")]
    if base.startswith("pollux") and base[6:].isdigit():
        load = float(factor or 1)
        folder = {1.0: "workloads", 2.0: "workloads-2.0"}.get(load)
        if folder is None:
            raise SystemExit(f"{name}: Pollux workloads come at 1.0x and 2.0x load only")
        path = traces / "pollux" / folder / f"workload-{base[6:]}.csv"
        if not path.exists():
            raise SystemExit(f"no Pollux workload {path}")
        return [Workload(f"pollux{base[6:]}@{load:g}x", path, 64, 4)]
    if base == "philly":
        return [w for key in PHILLY_WINDOWS for w in workloads(key)]
    if base in PHILLY_WINDOWS:
        start = dt.date.fromisoformat(PHILLY_WINDOWS[base])
        end = start + dt.timedelta(days=WINDOW_DAYS)
        philly = traces / "philly.csv"
        return [Workload(base, philly, PHILLY_GPUS, 8, start.isoformat(), end.isoformat())]
    choices = "pollux, pollux1..8[@2], philly, " + ", ".join(PHILLY_WINDOWS)
    raise SystemExit(f"unknown workload {name!r}; choose {choices}")


def offered_load(spec: Workload) -> float | None:
    """GPU-time submitted in a Philly window over the window's GPU-time."""
    if spec.start is None or spec.end is None:
        return None
    start, end = dt.date.fromisoformat(spec.start), dt.date.fromisoformat(spec.end)
    per_day: dict[dt.date, float] = defaultdict(float)
    with spec.trace.open(newline="") as handle:
        for row in csv.DictReader(handle):
            day = dt.datetime.fromisoformat(row["timestamp"]).date()
            if start <= day < end:
                per_day[day] += float(row["gpu_time"])
    return sum(per_day.values()) / ((end - start).days * 86_400.0 * spec.gpus)


def command(spec: Workload, policy: str, options: dict[str, Any], eta: str, extra: str) -> str:
    """The ``jigsaw-cli simulate`` line that gives a row's figures."""
    parts = ["jigsaw-cli", "simulate", str(spec.trace), "--policy", policy]
    parts += ["--gpus", str(spec.gpus), "--gpus-per-node", str(spec.gpus_per_node)]
    if spec.start is not None:
        parts += ["--start", spec.start, "--end", str(spec.end)]
    if options:
        parts += ["--policy-options", json.dumps({policy: options})]
    if eta != "table":
        parts += ["--eta", eta]
    line = " ".join(shlex.quote(p) for p in parts)
    return f"{line} {extra}".strip() + " -o json"


def run_workload(
    spec: Workload, rows: list[str], sharing: str, interference: float | None
) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    plain = SharingSettings(sharing)
    wanted = [(label, *ROWS[label], plain) for label in rows]
    if interference is not None:
        penalised = SharingSettings(sharing, interference)
        wanted += [(f"{p}-interference", p, {}, "table", penalised) for p in INTERFERENCE_ROWS]
    jobs = None
    for label, policy, options, eta, shared in wanted:
        setup = simulation_setup(
            spec.trace,
            gpus=spec.gpus,
            gpus_per_node=spec.gpus_per_node,
            eta=eta,
            policy_options={policy: options} if options else {},
            sharing=shared,
        )
        started = time.perf_counter()
        (result,) = simulate_trace(spec.trace, [policy], setup, start=spec.start, end=spec.end)
        summary = result.summary
        jobs = summary["jobs"]
        row: dict[str, Any] = {"row": label, "policy": policy, "options": options, "eta": eta}
        row.update({key: summary[key] for key in COLUMNS})
        row["cell_s"] = time.perf_counter() - started
        row["semantics"] = summary["semantics"]
        flags = "" if shared.mode == "timeslice" else f"--sharing {shared.mode}"
        if shared.interference:
            flags += f" --interference {shared.interference:g}"
        row["command"] = command(spec, policy, options, eta, flags.strip())
        row["sharing"] = {"mode": shared.mode, "interference": shared.interference}
        results.append(row)
        print(
            f"{spec.name} {label}: {row['avg_jct_s']:.0f} s avg JCT, {row['cell_s']:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    return {
        "workload": spec.name,
        "trace": str(spec.trace),
        "gpus": spec.gpus,
        "gpus_per_node": spec.gpus_per_node,
        "window": [spec.start, spec.end] if spec.start else None,
        "offered_load": offered_load(spec),
        "jobs": jobs,
        "rows": results,
        "jigsaw_vs_best_peer": versus(results),
    }


def versus(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    by_row = {row["row"]: row for row in rows}
    peers = [by_row[p] for p in PEERS if p in by_row]
    if "jigsaw" not in by_row or not peers:
        return None
    best = min(peers, key=lambda row: row["avg_jct_s"])
    return {
        "peer": best["row"],
        "avg_jct_change": by_row["jigsaw"]["avg_jct_s"] / best["avg_jct_s"] - 1.0,
    }


LABELS = (*ROWS, *(f"{p}-interference" for p in INTERFERENCE_ROWS))


def merged_workloads(paths: list[Path]) -> list[dict[str, Any]]:
    """The workloads of saved outputs, merged by name: a row of a later file replaces the
    row of the same label from an earlier one (a rerun of some rows); rows in LABELS order."""
    works: dict[str, dict[str, Any]] = {}
    for path in paths:
        for work in json.loads(path.read_text())["workloads"]:
            kept = works.setdefault(work["workload"], {**work, "rows": []})
            if kept["jobs"] is None:
                kept["jobs"] = work["jobs"]
            by_label = {row["row"]: row for row in kept["rows"]}
            by_label.update({row["row"]: row for row in work["rows"]})
            kept["rows"] = [by_label[label] for label in LABELS if label in by_label]
    return list(works.values())


def summary_markdown(paths: list[Path]) -> str:
    """Average JCT (hours) of every row, one line per workload, and jigsaw against the best
    peer (negative: jigsaw is better) and against the best peer other than pollux."""
    works = merged_workloads(paths)
    candidates = LABELS
    labels = [c for c in candidates if any(r["row"] == c for w in works for r in w["rows"])]
    head = ["workload", "jobs", "load", *labels, "jigsaw vs best peer", "vs best w/o pollux"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for work in works:
        by_row = {r["row"]: r for r in work["rows"]}
        peers = {p: by_row[p]["avg_jct_s"] for p in PEERS if p in by_row}
        best = min(peers, key=peers.__getitem__)
        cells = []
        for label in labels:
            row = by_row.get(label)
            text = "—" if row is None else _hours(row["avg_jct_s"])
            cells.append(f"**{text}**" if label == best else text)
        jigsaw = by_row["jigsaw"]["avg_jct_s"]
        others = {p: v for p, v in peers.items() if p != "pollux"}
        load = work.get("offered_load")
        if others:
            second = min(others, key=others.__getitem__)
            without = f"{jigsaw / others[second] - 1:+.1%} ({second})"
        else:
            without = "—"  # pollux was the only peer run
        lines.append(
            f"| {work['workload']} | {work['jobs']} | "
            f"{'—' if load is None else f'{load:.2f}'} | {' | '.join(cells)} | "
            f"{jigsaw / peers[best] - 1:+.1%} ({best}) | {without} |"
        )
    return "\n".join(lines)


def geomean_markdown(paths: list[Path], against: tuple[str, ...] = ("pollux", "las")) -> str:
    """Per load of Pollux's workloads (``@1x``, ``@2x``), the geometric mean over its workloads
    of every row's average JCT divided by that of each row in ``against`` that every workload
    has (saved outputs without a las row still get their means over pollux)."""
    works = [w for w in merged_workloads(paths) if "@" in w["workload"]]
    present = {r["row"] for w in works for r in w["rows"]}
    against = tuple(
        a
        for a in against
        if a in present and all(a in {r["row"] for r in w["rows"]} for w in works)
    )
    loads = sorted({w["workload"].split("@")[1] for w in works})
    head = ["load", "row", *(f"over {a}" for a in against)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for load in loads:
        rows = [{r["row"]: r["avg_jct_s"] for r in w["rows"]} for w in works]
        rows = [r for w, r in zip(works, rows, strict=True) if w["workload"].endswith(load)]
        for label in LABELS:
            if not all(label in r and all(a in r for a in against) for r in rows):
                continue
            means = [
                math.exp(sum(math.log(r[label] / r[a]) for r in rows) / len(rows)) for a in against
            ]
            lines.append(f"| {load} | {label} | " + " | ".join(f"{m:.3f}" for m in means) + " |")
    return "\n".join(lines)


def markdown(paths: list[Path]) -> str:
    """The gain table from saved JSON outputs: one block per workload, hours."""
    lines = [
        "| workload | row | avg JCT | p50 | p99 | makespan | cluster eff | util "
        "| preempt | packed | cell (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for work in merged_workloads(paths):
        rows = work["rows"]
        best = min(rows, key=lambda r: r["avg_jct_s"])["row"]
        for row in rows:
            name = f"**{row['row']}**" if row["row"] == best else row["row"]
            hours = [_hours(row[k]) for k in ("avg_jct_s", "p50_jct_s", "p99_jct_s")]
            lines.append(
                f"| {work['workload']} | {name} | {' | '.join(hours)} | "
                f"{_hours(row['makespan_s'])} | {row['cluster_efficiency']:.3f} | "
                f"{row['utilization']:.3f} | {row['preemptions']} | {row['packed_starts']} | "
                f"{row['cell_s']:.1f} |"
            )
    return "\n".join(lines)


def _hours(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    return f"{seconds / 3600:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="pollux")
    parser.add_argument(
        "--rows", default=",".join(ROWS), help=f"comma-separated subset of {', '.join(ROWS)}"
    )
    parser.add_argument("--sharing", default="timeslice", help="timeslice or concurrent")
    parser.add_argument(
        "--interference", type=float, default=None, help="add the interference sensitivity rows"
    )
    parser.add_argument(
        "--eta",
        default="table",
        help="the --eta of every row priced from the table (table or curve; jigsaw-eta1 stays one)",
    )
    parser.add_argument("--table", nargs="+", type=Path, help="print saved outputs as markdown")
    args = parser.parse_args()
    if args.table:
        print(
            summary_markdown(args.table)
            + "\n\n"
            + geomean_markdown(args.table)
            + "\n\n"
            + markdown(args.table)
        )
        return
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = sorted(set(rows) - set(ROWS))
    if unknown:
        parser.error(f"unknown rows {', '.join(unknown)}; choose from {', '.join(ROWS)}")
    try:
        SharingSettings(args.sharing, args.interference or 0.0)
    except ValueError as error:
        parser.error(str(error))
    if args.eta not in ("table", "curve"):
        parser.error(f"--eta must be table or curve, got {args.eta!r}")
    for label, (policy, options, eta) in list(ROWS.items()):
        if eta == "table":
            ROWS[label] = (policy, options, args.eta)
    specs = [w for name in args.workloads.split(",") if name.strip() for w in workloads(name)]
    started = time.perf_counter()
    report = [run_workload(spec, rows, args.sharing, args.interference) for spec in specs]
    payload = {
        "bench": "sim_gain",
        "path": "jigsaw.simulator.trace_replay.simulate_trace (jigsaw-cli simulate)",
        "rows": rows,
        "sharing": args.sharing,
        "interference": args.interference,
        "wall_s": time.perf_counter() - started,
        "workloads": report,
    }
    print(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()
