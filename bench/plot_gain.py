"""The cluster-gain table as a bar chart: average JCT by policy and workload, from the committed
results of ``bench/sim_gain.py`` (docs/BENCHMARKS.md, "Cluster-level gain (current)").

Two panels. Pollux's workloads: the geometric mean over the 8 workloads of each policy's
average JCT over pollux's, at 1.0x and 2.0x load. Philly's fortnights: each policy's average
JCT over las's, per window. Lower is better; the axis is logarithmic so fifo fits beside the
rest.

    .venv/bin/python -m bench.plot_gain            # writes docs/img/cluster_gain.png
    .venv/bin/python -m bench.plot_gain --print    # the plotted ratios, as JSON

Needs matplotlib (the ``plot`` or ``dev`` extra); draws with the Agg backend, no display.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from bench.sim_gain import merged_workloads

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
CURRENT = [
    RESULTS / name
    for name in (
        "sim_gain_peers_pollux_session23.json",
        "sim_gain_default_pollux_ablations_session23.json",
        "sim_gain_peers_philly_session23.json",
        "sim_gain_default_philly_ablations_session24.json",
        "sim_gain_philly_critical_rows_session24.json",
        "sim_gain_philly_nohold_session24.json",
    )
]
"""The files behind the current tables, in the order ``sim_gain.py --table`` merges them (a
later file's row replaces an earlier one's)."""
POLICIES = ("fifo", "las", "maxmin", "timeslice", "pollux", "jigsaw")
OUTPUT = ROOT / "docs" / "img" / "cluster_gain.png"

Ratios = dict[str, dict[str, float]]
"""Group (a load, a Philly window) -> policy -> average JCT over the reference policy's."""


def pollux_ratios(paths: list[Path]) -> Ratios:
    """Per load, the geometric mean over Pollux's workloads of avg JCT over pollux's."""
    works = [w for w in merged_workloads(paths) if "@" in w["workload"]]
    ratios: Ratios = {}
    for load in sorted({w["workload"].split("@")[1] for w in works}):
        rows = [
            {r["row"]: r["avg_jct_s"] for r in w["rows"]}
            for w in works
            if w["workload"].endswith(f"@{load}")
        ]
        ratios[f"Pollux workloads {load}"] = {
            policy: math.exp(sum(math.log(r[policy] / r["pollux"]) for r in rows) / len(rows))
            for policy in POLICIES
            if all(policy in r for r in rows)
        }
    return ratios


def philly_ratios(paths: list[Path]) -> Ratios:
    """Per Philly window, each policy's avg JCT over las's."""
    ratios: Ratios = {}
    for work in merged_workloads(paths):
        if not work["workload"].startswith("philly"):
            continue
        jct = {r["row"]: r["avg_jct_s"] for r in work["rows"]}
        ratios[work["workload"]] = {p: jct[p] / jct["las"] for p in POLICIES if p in jct}
    return ratios


def draw(pollux: Ratios, philly: Ratios, output: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    figure, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    colour = {p: plt.get_cmap("tab10")(i) for i, p in enumerate(POLICIES)}
    panels = (
        (axes[0], pollux, "avg JCT / pollux's (geometric mean)"),
        (axes[1], philly, "avg JCT / las's"),
    )
    for ax, ratios, label in panels:
        groups = list(ratios)
        policies = [p for p in POLICIES if any(p in ratios[g] for g in groups)]
        width = 0.8 / len(policies)
        for i, policy in enumerate(policies):
            xs = [g + (i - (len(policies) - 1) / 2) * width for g in range(len(groups))]
            ys = [ratios[group].get(policy, math.nan) for group in groups]
            bars = ax.bar(xs, ys, width, label=policy, color=colour[policy])
            ax.bar_label(bars, labels=[f"{y:.2f}" for y in ys], fontsize=6, rotation=90)
        ax.set_xticks(range(len(groups)), groups)
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_ylabel(label + ", lower is better", fontsize=9)
    axes[0].set_title("Pollux's 8 workloads, 64 GPUs, Pollux's semantics", fontsize=10)
    axes[1].set_title("Philly fortnights, 256 GPUs, jigsaw's semantics", fontsize=10)
    handles = [Rectangle((0, 0), 1, 1, color=colour[p]) for p in POLICIES]
    figure.legend(handles, POLICIES, loc="lower center", ncol=len(POLICIES), fontsize=9)
    figure.suptitle("Cluster-level gain: average JCT by policy (bench/plot_gain.py)")
    figure.tight_layout(rect=(0, 0.07, 1, 1))
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=110)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--print", action="store_true", help="print the ratios, draw nothing")
    args = parser.parse_args()
    pollux, philly = pollux_ratios(CURRENT), philly_ratios(CURRENT)
    if args.print:
        print(json.dumps({"pollux": pollux, "philly": philly}, indent=2))
        return
    draw(pollux, philly, args.output)
    print(args.output)


if __name__ == "__main__":
    main()
