"""Which simulator semantics a replay follows, chosen by the trace format.

A result counts only if the instrument agrees with the peers' own simulators on their own
traces (docs/SCHEDULER.md, "Simulator semantics"). So a replay follows:

- ``jigsaw`` for Philly traces and job lists: our own rules (scheduling on events or 60 s
  rounds, 30 s restart after a preemption, 30-minute protection of fresh gangs);
- ``pollux`` for Pollux workloads: Pollux's simulator (petuum/adaptdl, osdi21-artifact):
  60 s scheduling interval, every (re)allocation costs 30 s, work from the validation curves,
  and las is its Tiresias baseline (two queues split at 16 GPU-hours, no starvation
  promotion, no protection);
- ``gavel`` for Gavel ``.trace`` files replayed with ``--throughputs``: Gavel's simulator
  (stanford-futuredata/gavel ``scheduler/scheduler.py``): 360 s rounds of whole steps
  (``GavelRate.round_s``) that end early when every gang of the round has finished,
  newcomers schedulable only at allocation resets (at least 1,920 s apart), no restart cost,
  no protection (Gavel time-slices at round granularity), no reservation, and fifo and
  maxmin run as Gavel's own (its allocation, held between resets, and its priority).

No flag picks them; the output says which one ran (``semantics`` in the JSON summary).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jigsaw.policies.jigsaw import JigsawConfig
from jigsaw.policies.shared.fairness import LasConfig
from jigsaw.policies.shared.gang import DEFAULT_MIN_RUN_S
from jigsaw.policies.timeslice import TimesliceConfig
from jigsaw.simulator.rates import OverheadModel

TIRESIAS_THRESHOLD_GPU_S = 16 * 3_600.0
"""Pollux's Tiresias baseline demotes a job to its second queue after 16 GPU-hours."""

TIRESIAS = LasConfig(
    thresholds=(TIRESIAS_THRESHOLD_GPU_S,), promote_knob=1.0, promote_floor_s=math.inf
)
"""Two queues, arrival order within each, never promoted back (its ``solve_starvation`` is 0)."""


@dataclass(frozen=True, slots=True)
class Semantics:
    name: str
    summary: str
    """One line for the CLI output."""
    round_s: float = 60.0
    """Round length when the user gives none."""
    admit_in_rounds: bool = False
    rounds_end_when_idle: bool = False
    """Gavel: a round ends when its last gang ends; an idle cluster starts a round at once."""
    rounds_on_grid_only: bool = False
    """Pollux: decisions only at multiples of the interval, counted from time 0."""
    allocation_reset_s: float | None = None
    """Gavel: newcomers become schedulable, and fifo re-allocates, only at allocation resets
    at least this far apart (its ``minimum_time_between_allocation_resets``)."""
    overheads: OverheadModel = field(default_factory=OverheadModel)
    policy_options: dict[str, dict[str, Any]] = field(default_factory=dict)


def restart_as_charged(
    overheads: OverheadModel, *, min_run_s: float = 0.0, protect_longest: bool = False
) -> JigsawConfig:
    """The jigsaw policy's restart prior and launch equal to what the replay charges, so its
    discount prices the seconds it pays before a job has measured one (``Job.resize_s``);
    ``min_run_s`` and ``protect_longest``: the semantics' protection of running jobs from
    preemption (Pollux's and Gavel's policies protect nobody)."""
    return JigsawConfig(
        restart_s=overheads.restart_s,
        launch_s=overheads.launch_s,
        min_run_s=min_run_s,
        protect_longest=protect_longest,
    )


JIGSAW = Semantics(
    "jigsaw",
    "jigsaw: events (fifo) or 60 s rounds, 30 s restart, 30 min protection (docs/SCHEDULER.md)",
    policy_options={
        "jigsaw": {
            "config": restart_as_charged(
                OverheadModel(), min_run_s=DEFAULT_MIN_RUN_S, protect_longest=True
            )
        }
    },
)

_POLLUX_OVERHEADS = OverheadModel(launch_s=30.0, restart_s=30.0, replan_s=30.0)

POLLUX = Semantics(
    "pollux",
    "pollux: 60 s interval, 30 s per (re)allocation, work = epochs through statistical "
    "efficiency, las = Tiresias (16 GPU-h queues, no protection)",
    round_s=60.0,
    admit_in_rounds=True,
    rounds_on_grid_only=True,
    overheads=_POLLUX_OVERHEADS,
    policy_options={
        "las": {
            "config": TIRESIAS,
            "min_run_s": 0.0,
            "reserve": False,
        },
        "jigsaw": {"config": restart_as_charged(_POLLUX_OVERHEADS)},
        "timeslice": {"config": TimesliceConfig(las=TIRESIAS, min_run_s=0.0)},
    },
)

_GAVEL_OVERHEADS = OverheadModel(launch_s=0.0, restart_s=0.0, replan_s=0.0)

GAVEL = Semantics(
    "gavel",
    "gavel: 360 s rounds of whole steps ending with their last gang, newcomers at "
    "allocation resets (>= 1,920 s apart), no restart cost, no protection, "
    "fifo and maxmin = Gavel's allocation and priority",
    round_s=360.0,
    admit_in_rounds=True,
    rounds_end_when_idle=True,
    allocation_reset_s=1_920.0,
    overheads=_GAVEL_OVERHEADS,
    policy_options={
        "fifo": {"ranking": "gavel"},
        "las": {"min_run_s": 0.0, "reserve": False},
        "maxmin": {"min_run_s": 0.0, "reserve": False, "ranking": "gavel"},
        "jigsaw": {"config": restart_as_charged(_GAVEL_OVERHEADS)},
        "timeslice": {"config": TimesliceConfig(min_run_s=0.0)},
    },
)


def trace_format(path: Path) -> str:
    """``philly``, ``pollux``, ``gavel`` or ``joblist``, as :func:`jigsaw.traces.load_trace`
    decides."""
    suffix = path.suffix.lower()
    if suffix == ".trace":
        return "gavel"
    if suffix == ".csv" and path.is_file():
        with path.open() as handle:
            header = handle.readline().strip().replace(" ", "")
        if header.startswith("name,time,application"):
            return "pollux"
        return "philly"
    return "joblist"


def semantics_for(path: Path, *, throughputs: bool) -> Semantics:
    match trace_format(path):
        case "pollux":
            return POLLUX
        case "gavel" if throughputs:
            return GAVEL
    return JIGSAW
