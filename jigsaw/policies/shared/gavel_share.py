"""Gavel's max-min ranking on a homogeneous cluster (``maxmin`` with ``ranking="gavel"``).

Read from stanford-futuredata/gavel (``scheduler/policies/max_min_fairness.py``,
``Scheduler._update_priorities``, ``_reset_time_run_so_far`` and
``_schedule_jobs_on_workers_helper``), reimplemented:

- **Allocation.** Gavel's LP maximises the smallest ``scale_j x_j / w_j`` subject to
  ``sum_j scale_j x_j <= GPUs`` and ``0 <= x_j <= 1``: every job gets at least the same
  weighted *GPU* share ``t*``, with ``t* = min(GPUs / sum_j w_j, min_j scale_j / w_j)``.
  The LP says nothing about GPUs left over above that minimum (there are some when fewer jobs
  than GPUs wait but their gangs ask for more); Gavel's solver (ECOS, an interior-point
  method) returns a point inside that face of optima, close to its analytic centre, so the
  leftover is spread over the jobs below ``x = 1`` without filling it
  (:func:`gavel_allocation`).
- **When the allocation changes.** Only at an *allocation reset*: a round where jobs arrived
  or finished since the last reset, at least 1,920 s after it. Between resets the allocation
  is held; a job that arrived since has none (the replay holds arrivals until the reset
  anyway, ``jigsaw/simulator/allocation_resets.py``).
- **Priority.** Each round, job ``j``'s priority is ``x_j / fraction_j``, ``fraction_j``
  being its share of the *job time* (not GPU time) run since the last reset, every job
  starting each reset with a head start of half a round. Jobs with no allocation come last.
  Equal priorities go to the larger *deficit* (``x_j`` times the interval minus the time
  run, summed over past intervals), then the larger ``x_j``, then arrival.
- **Where the state lives.** The allocation and the counters are a value
  (:class:`GavelState`). A round ranks with the state it would leave and changes nothing; the
  policy keeps that state in ``end_round``, the step the scheduling cycle runs after it
  applied the round's decisions (:class:`jigsaw.policies.base.KeepsRoundState`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from jigsaw.model.domain import Job
from jigsaw.policies.shared.fairness import priority_weight

GAVEL_RESET_INTERVAL_S = 1_920.0
"""Gavel's ``minimum_time_between_allocation_resets``."""

GAVEL_HEAD_START_S = 180.0
"""Gavel starts every job's time of each reset interval at half its 360 s round."""

_CENTRE_STEPS = 60
_CENTRE_TOLERANCE = 1e-12


def gavel_allocation(jobs: Sequence[Job], capacity: int) -> dict[str, float]:
    """Time fraction ``x_j`` in [0, 1] per job: Gavel's max-min LP optimum, its leftover
    spread as an interior-point solver leaves it (the analytic centre of the optimal face)."""
    if not jobs:
        return {}
    weights = [priority_weight(job.spec.priority) for job in jobs]
    scales = [job.spec.workers for job in jobs]
    level = min(capacity / sum(weights), min(s / w for s, w in zip(scales, weights, strict=True)))
    floors = [min(1.0, level * w / s) for s, w in zip(scales, weights, strict=True)]
    free = [i for i, floor in enumerate(floors) if floor < 1.0]
    left = capacity - sum(scales[i] * floors[i] for i in range(len(jobs)))
    shares = list(floors)
    if free and left > 1e-9 * capacity:
        centre = _analytic_centre(
            [floors[i] for i in free],
            [float(scales[i]) for i in free],
            capacity - sum(scales[i] for i in range(len(jobs)) if floors[i] >= 1.0),
        )
        for i, share in zip(free, centre, strict=True):
            shares[i] = share
    return {job.id: share for job, share in zip(jobs, shares, strict=True)}


def _analytic_centre(floors: list[float], scales: list[float], capacity: float) -> list[float]:
    """The point of ``{floor_j <= x_j <= 1, x_j >= 0, sum_j scale_j x_j <= capacity}`` that
    maximises the sum of the logs of every constraint's slack (Newton's method; the Hessian
    is diagonal plus one rank-one term from the capacity row, so each step is O(jobs))."""
    # Start strictly inside: a fraction of the way from the floors towards 1, within capacity.
    used = sum(s * f for s, f in zip(scales, floors, strict=True))
    room = sum(s * (1.0 - f) for s, f in zip(scales, floors, strict=True))
    step_in = 0.5 * min(1.0, (capacity - used) / room) if room > 0 else 0.0
    x = [f + step_in * (1.0 - f) for f in floors]
    for _ in range(_CENTRE_STEPS):
        slack = capacity - sum(s * xi for s, xi in zip(scales, x, strict=True))
        gradient, curvature = [], []
        for xi, floor, scale in zip(x, floors, scales, strict=True):
            low, high = xi - floor, 1.0 - xi
            gradient.append(1 / low + 1 / xi - 1 / high - scale / slack)
            curvature.append(1 / low**2 + 1 / xi**2 + 1 / high**2)
        # Solve (D + s s^T / slack^2) step = gradient by Sherman-Morrison.
        d_inv_g = [g / c for g, c in zip(gradient, curvature, strict=True)]
        d_inv_s = [s / c for s, c in zip(scales, curvature, strict=True)]
        coupling = sum(s * v for s, v in zip(scales, d_inv_g, strict=True)) / (
            slack**2 + sum(s * v for s, v in zip(scales, d_inv_s, strict=True))
        )
        step = [a - b * coupling for a, b in zip(d_inv_g, d_inv_s, strict=True)]
        decrement = sum(g * st for g, st in zip(gradient, step, strict=True))
        if decrement < _CENTRE_TOLERANCE:
            break
        # Damped until every slack stays positive.
        length = 1.0
        while True:
            trial = [xi + length * st for xi, st in zip(x, step, strict=True)]
            trial_slack = capacity - sum(s * t for s, t in zip(scales, trial, strict=True))
            if trial_slack > 0 and all(
                f < t < 1.0 and t > 0 for f, t in zip(floors, trial, strict=True)
            ):
                break
            length /= 2
        x = trial
    return x


Allocate = Callable[[Sequence[Job], int, Mapping[str, float]], dict[str, float]]
"""(active jobs, GPUs, the allocation until now) -> the new allocation ``x_j`` per job."""


def maxmin_allocate(
    jobs: Sequence[Job], capacity: int, previous: Mapping[str, float]
) -> dict[str, float]:
    del previous  # max-min starts afresh at every reset
    return gavel_allocation(jobs, capacity)


@dataclass(frozen=True, slots=True)
class GavelState:
    """What Gavel keeps between rounds: the allocation of the last reset and the counters its
    priorities and deficits start from. A value: a round computes the next one and the
    cycle keeps it (:meth:`GavelPriorities.end_round`), so deciding changes nothing."""

    allocation: Mapping[str, float] = field(default_factory=dict)
    """``x_j`` of the jobs active at the last reset."""
    last_reset: float = 0.0
    changed: bool = False
    """A job finished since the last reset."""
    served_at_reset: Mapping[str, float] = field(default_factory=dict)
    """Each job's job-seconds run at the last reset: its time since is the difference."""
    deficits: Mapping[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class GavelPriorities:
    """Gavel's per-round priorities, and the state they carry from one round to the next.

    ``decide`` reads the state only (:meth:`round_state`, :meth:`order`); the policy's
    ``end_round``, which the scheduling cycle calls once a round's decisions are applied,
    keeps the state that round worked with (:meth:`end_round`). Asking twice about one
    world, or about part of it (poison bisection), therefore resets nothing."""

    reset_interval_s: float = GAVEL_RESET_INTERVAL_S
    head_start_s: float = GAVEL_HEAD_START_S
    allocate: Allocate = maxmin_allocate
    """The policy's allocation, recomputed at each reset (max-min's LP, FIFO's queue)."""
    state: GavelState = field(default_factory=GavelState)
    """As the last round left it."""

    def round_state(self, jobs: Sequence[Job], now: float, capacity: int) -> GavelState:
        """The state a round of ``jobs`` at ``now`` ranks with: the kept one, reset first
        when a reset is due. Changes nothing."""
        state = self.state
        active = {job.id for job in jobs}
        changed = state.changed or any(job_id not in active for job_id in state.allocation)
        newcomer = any(job.id not in state.deficits for job in jobs)
        interval_over = state.last_reset == 0.0 or now - state.last_reset >= self.reset_interval_s
        # A newcomer is visible only from a reset on: the replay releases arrivals there.
        if newcomer or (changed and interval_over):
            return self._reset(state, jobs, now, capacity)
        return state if changed == state.changed else replace(state, changed=changed)

    def order(self, jobs: Sequence[Job], now: float, capacity: int) -> list[Job]:
        """Every job, highest priority first, in the round's state (:meth:`round_state`)."""
        return self.ranked(jobs, now, self.round_state(jobs, now, capacity))

    def ranked(self, jobs: Sequence[Job], now: float, state: GavelState) -> list[Job]:
        """Every job, highest priority first, by ``state``'s allocation and counters."""

        def key(job: Job) -> tuple[float, float, float, float, str]:
            share = state.allocation.get(job.id, 0.0)
            priority = 0.0
            if share > 0.0:
                run = _job_seconds(job, now) - state.served_at_reset.get(job.id, 0.0)
                priority = share / (self.head_start_s + run)
            deficit = state.deficits.get(job.id, 0.0)
            return (-priority, -deficit, -share, job.submitted_at, job.id)

        return sorted(jobs, key=key)

    def end_round(self, jobs: Sequence[Job], now: float, capacity: int) -> None:
        """Keep the state the round of ``jobs`` at ``now`` ranked with (a reset, if it was
        due, now happened): the step after the cycle applied that round's decisions."""
        self.state = self.round_state(jobs, now, capacity)

    def restart_reset_clock(self) -> None:
        """Gavel's simulator does this when nothing runs and every job has arrived: the next
        round resets if anything changed, however recent the last reset."""
        self.state = replace(self.state, last_reset=0.0)

    def _reset(
        self, state: GavelState, jobs: Sequence[Job], now: float, capacity: int
    ) -> GavelState:
        # As in Gavel, a reset clock at 0 (the first interval, or restarted) counts from 0.
        elapsed = now - state.last_reset
        served = {job.id: _job_seconds(job, now) for job in jobs}
        deficits = {}
        for job in jobs:
            owed = state.allocation.get(job.id, 0.0) * elapsed
            run = served[job.id] - state.served_at_reset.get(job.id, served[job.id])
            deficits[job.id] = state.deficits.get(job.id, 0.0) + owed - run
        return GavelState(
            allocation=self.allocate(jobs, capacity, state.allocation),
            last_reset=now,
            changed=False,
            served_at_reset=served,
            deficits=deficits,
        )


def _job_seconds(job: Job, now: float) -> float:
    """Seconds the job has run (its GPU-seconds over its gang size)."""
    return job.attained_service(now) / job.spec.workers
