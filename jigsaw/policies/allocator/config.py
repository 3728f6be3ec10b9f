"""The jigsaw policy's options: which levers it may pull and how the objective weighs them.

With ``guests`` and ``hosts`` off, no attained-service or work-left weight
(``service_weight`` and ``remaining_weight`` 0), no starvation pin (``promote_s`` inf), no
protection (``min_run_s`` 0, ``protect_longest`` off) and a first start priced as Pollux
prices it (``launch_s`` 30, as Pollux's semantics sets), the objective is exactly Pollux's and
so are the decisions;
the co-tenancy levers are then taken only where they lower the same objective.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

KNOWLEDGE = ("reports", "oracle")
SIZE_SETS = ("all", "powers")


@dataclass(frozen=True, slots=True)
class JigsawConfig:
    guests: bool = True
    """Offer guest columns: a waiting one-GPU job runs on a shared GPU of a running gang."""
    hosts: bool = True
    """Offer SPB host columns: a running gang switches to a staircase (one or two stop depths)
    in place, so its partial ranks leave more of their GPU to a guest. Off with ``guests``
    on: guests share full-backprop gangs' GPUs by time-slicing only (timeslice-like)."""
    fairness_power: float = -0.5
    """Exponent of the power mean of speedups (Pollux: -1; closer to 0 is less fair). -0.5 by
    default, measured: average JCT 0.991x / 0.993x pollux on Pollux's workloads at 1.0x /
    2.0x (against 1.004x / 1.002x at -1) and lower on all three Philly fortnights (3.54 /
    7.54 / 13.25 h against 3.74 / 7.60 / 13.45 h; docs/BENCHMARKS.md, "The fairness
    power"). -1 is the ablation row ``jigsaw-p1``, and what the containment test sets."""
    knowledge: str = "reports"
    """``reports``: elastic jobs are sized from the goodput source (their agents' reports);
    ``oracle``: the source is ignored and every job keeps the size it asked for (an ablation)."""
    restart_s: float = 30.0
    """A restart's cost before the job has measured one (``Job.resize_s``), in the discount."""
    launch_s: float = 0.0
    """A first start's cost in the discount (Pollux charges every allocation 30 s; a service
    job's first start restarts nothing, and a trace's run times include its launch)."""
    service_weight: float = 1.0
    """Tiresias-like weight: a job's objective term counts ``1 + service_weight x
    T / (T + attained GPU-seconds)`` (``T`` = ``service_scale_s``): little attained service
    weighs more. 0: Pollux's unweighted objective."""
    service_scale_s: float = 3_600.0
    remaining_weight: float = 64.0
    """Shortest remaining work first, in the weight: a job's weight also counts
    ``remaining_weight x T / (T + left)`` (``T`` = ``service_scale_s``), ``left`` its seconds
    of work left as its record counts them: the iterations left at its run's start or last
    progress report, at its requested size's best exclusive speed
    (:mod:`~jigsaw.policies.allocator.remaining`; the job's spec names its iterations, so
    the estimate carries the oracle's step-time error, 6.7-9.6% MAPE). 64 by default, measured:
    0.940x / 0.909x pollux's average JCT on Pollux's workloads at 1.0x / 2.0x, worst 0.977x,
    and 0.755x / 0.704x / 0.732x on Philly's fortnights with ``protect_longest``
    (docs/BENCHMARKS.md, "Shortest remaining work first"). 0: the issue's objective, which
    reads no job's remaining work (nor does pollux's); what the containment test sets."""
    wait_weight: float = 0.0
    """Aging: a job's weight also counts ``wait_weight x waited / service_scale_s``, with
    ``waited`` the seconds it has waited (:meth:`~jigsaw.policies.allocator.objective.
    Objective.waited_s`; it stops growing while the job runs). A gang that a stream of small
    jobs keeps waiting grows dearer to leave out until it wins its GPUs: a price where
    ``promote_s`` is a pin. 0 (the default): off. Experimental: at 1 it made philly-low
    worse on every metric (4.75 h average JCT against 3.75 h, twenty times the preemptions;
    docs/BENCHMARKS.md, "Aging")."""
    promote_s: float = math.inf
    """Starvation pin: the waiting job that has waited longest, if longer than this
    (:meth:`~jigsaw.policies.allocator.objective.Objective.waited_s`), loses its off column
    while the GPUs suffice: it runs this round, and a starving job that runs is not preempted
    again; while it does not fit, no other waiting job starts (one reservation at a time, as
    EASY backfilling keeps). Off (inf) by default: even one reservation drains GPUs under a
    sustained backlog (philly-low at 24 h: 5.49 h average JCT against 3.74 h without it);
    promoting every job past the threshold, as the pin first did, made the round FIFO with
    evictions (21.9 h at 30 min, 14.8 h at 48 h; docs/BENCHMARKS.md). The adversarial stream
    of tests/core/policies/test_allocator_decisions.py sets it to one hour."""
    protect_longest: bool = True
    """Keep the critical path running: a job whose work left reaches the drain horizon (no
    packing of the rest could finish before it) is kept running, or started if it waits,
    within ``critical_share`` of the GPUs (:mod:`~jigsaw.policies.allocator.longest_job`).
    On by default: with the work-left weight it keeps philly-high's makespan at the shortest
    peer's (1,323.4 h against 1,938.4 h without it), and with ``critical_share`` philly-mid's
    too (docs/BENCHMARKS.md, "The critical path started"). Pollux's and Gavel's semantics set
    it off (their policies protect nobody)."""
    critical_share: float = 0.125
    """The share of the GPUs the critical path may hold: every critical job, running or
    waiting, most work left first, while its GPUs fit in the share; a waiting one must start
    (it loses its off column) while the GPUs not held by protected jobs suffice. 0: the
    longest running critical job alone, never a waiting one (session 23's rule; philly-mid's
    makespan then 28% above the shortest peer's, a 16-GPU gang waiting 375 h). 0.125 by
    default, measured on Philly's fortnights (docs/BENCHMARKS.md, "The critical path
    started")."""
    critical_hold: float = 0.03
    """Where the critical path's share is full, a running critical job ranks as if it had
    this share more of its seconds left: a waiting one takes its place only with 3% more
    left. Between near-equals the running one keeps running; at 0 two such jobs swapped at
    every minimum run's end (a 16-GPU gang preempted 117 times on philly-mid, seed 1).
    Measured (docs/BENCHMARKS.md, "The critical path started"): 0.54x, 0.76x and 0.63x the
    preemptions on Philly's low, mid and high fortnights, average JCT within ±0.6%."""
    churn: float = 0.0
    """A change of configuration costs this share of the job's term on top of the restart
    discount (a small bias towards keeping things as they are)."""
    min_hold_s: float = 0.0
    """A job started or resized less than this long ago keeps its configuration."""
    min_run_s: float = 1_800.0
    """A running job is not preempted (it loses its off column, not its other sizes) before it
    has run this long since its start or last resize: it paid a restart to get there, and a
    gang preempted for a smaller job leaves GPUs idle until its restart. Pollux's and Gavel's
    semantics set 0 (their policies protect nobody)."""
    sizes: str = "all"
    """``all``: every size in the job's range (as Pollux); ``powers``: powers of two plus the
    current size and the range's ends (fewer columns at 1,000 GPUs)."""
    completion_guard: bool = True
    """A pack must also not lower the touched jobs' completion rate, ``sum(speed /
    remaining exclusive seconds)`` (the rate at which they finish; its greedy maximum is
    SRPT): summed goodput is throughput, and average JCT is not. A long guest does not slow a
    host near its end (timeslice's guard, in the program as a row; off: an ablation)."""
    guest_slots_per_job: int = 4
    """A guest is offered on its best this many slots (the MILP's size)."""
    host_keep: float = 0.5
    """Host guard: a host column is offered only if the host keeps this share of its goodput."""
    solver_nodes: int = 1_000
    """HiGHS' branch-and-bound nodes per round, its working limit: a count, so a replay's
    decisions do not depend on the machine's speed or load. The exclusive optimum is kept if
    HiGHS does not beat it."""
    solver_time_s: float = 5.0
    """HiGHS' time limit per round, a safety net far above any program seen: the longest of
    a Philly October week's 3,148 programs took 0.9 s to optimality (140 nodes). At 0.5 s,
    the limit before, three of them stopped at the clock, and two runs of that week gave
    different decision logs."""
    mip_rel_gap: float = 1e-4

    def __post_init__(self) -> None:
        if not self.fairness_power < 0:
            raise ValueError(f"fairness_power must be negative, got {self.fairness_power}")
        if self.knowledge not in KNOWLEDGE:
            raise ValueError(f"knowledge must be one of {', '.join(KNOWLEDGE)}")
        if self.sizes not in SIZE_SETS:
            raise ValueError(f"sizes must be one of {', '.join(SIZE_SETS)}")
        for name in (
            "restart_s",
            "launch_s",
            "service_weight",
            "wait_weight",
            "remaining_weight",
            "churn",
            "min_hold_s",
            "min_run_s",
        ):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0")
        if not self.service_scale_s > 0 or not self.promote_s > 0:
            raise ValueError("service_scale_s and promote_s must be > 0")
        if not 0.0 <= self.critical_share <= 1.0:
            raise ValueError("critical_share must be in [0, 1]")
        if not self.critical_hold >= 0.0:
            raise ValueError("critical_hold must be >= 0")
        if not 0.0 <= self.host_keep <= 1.0:
            raise ValueError("host_keep must be in [0, 1]")
        if self.guest_slots_per_job < 1 or not self.solver_time_s > 0:
            raise ValueError("guest_slots_per_job must be >= 1 and solver_time_s > 0")
        if self.solver_nodes < 1:
            raise ValueError("solver_nodes must be >= 1")
        if not 0.0 <= self.mip_rel_gap < 1.0 or math.isnan(self.mip_rel_gap):
            raise ValueError("mip_rel_gap must be in [0, 1)")
