"""Shared helpers of the simulator benches: locate traces, run policies, shape results."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from jigsaw.oracle import Oracle
from jigsaw.simulator import SimulationSetup, load_jobs, make_rates, replay
from jigsaw.simulator.rates import ReferenceRate
from jigsaw.simulator.workload import Arrival

ROOT = Path(__file__).resolve().parents[1]
REPORTED = (
    "policy",
    "jobs",
    "completed",
    "avg_jct_s",
    "p50_jct_s",
    "p99_jct_s",
    "makespan_s",
    "utilization",
    "cluster_efficiency",
    "busy_efficiency",
    "preemptions",
    "replans",
    "packed_starts",
    "rounds",
    "cycles",
    "stalled",
    "skipped_too_large",
    "wall_s",
)


def shared_traces() -> Path:
    """``$JIGSAW_SHARED_DIR/traces`` or ``../shared/traces`` next to the repository."""
    base = os.environ.get("JIGSAW_SHARED_DIR")
    root = Path(base) if base else ROOT.parent / "shared"
    traces = root / "traces"
    if not traces.is_dir():
        raise SystemExit(f"no traces at {traces}: set JIGSAW_SHARED_DIR")
    return traces


def prepare(
    trace: Path, setup: SimulationSetup, oracle: Oracle, **window: Any
) -> tuple[ReferenceRate, list[Arrival]]:
    jobs = load_jobs(trace, setup, oracle, **window)
    return make_rates(jobs, setup, oracle)


def run_policy(
    name: str,
    arrivals: list[Arrival],
    rates: ReferenceRate,
    oracle: Oracle,
    setup: SimulationSetup,
    *,
    label: str | None = None,
) -> dict[str, Any]:
    result = replay(arrivals, name, rates, oracle, setup)
    row = {key: result.summary[key] for key in REPORTED}
    row["policy"] = label or name
    return row
