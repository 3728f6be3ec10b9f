"""Time-slicing on shared GPUs: what each co-located gang's iteration time becomes.

Workers of different jobs on one GPU take turns at *iteration boundaries* (docs/SCHEDULER.md,
"Time-slicing"): a worker that is ready to compute its next iteration waits for the turn in
flight to end, and turns go round-robin among the ready workers. A turn is never cut short.

For a gang ``j`` let ``G_j`` be its iteration time with its GPUs to itself (compute, the
straggler term and exposed communication: the oracle's prediction) and ``b_jg`` the compute
seconds one iteration of ``j`` spends on GPU ``g``. While ``j`` runs one iteration (``T_j``
seconds), an occupant ``k`` of the same GPU runs ``T_j / T_k`` turns, but ``j`` waits for at
most one turn of each ``k`` per iteration (round-robin). So

    T_j = max(G_j, max_g c_jg),    c_jg = b_jg + sum_{k on g, k != j} b_kg * min(1, c_jg / T_k)

Consequences, each checked in tests/core/oracle/test_timeslicing.py:

- occupants whose summed utilisation ``b / T`` fits in the GPU and that are gated elsewhere
  (a partial SPB worker waits for rank 0 anyway) lose nothing;
- two always-ready jobs alternate: both take ``b_1 + b_2`` per iteration;
- a job with short iterations fills a gated worker's idle time: a partial worker busy 0.4 s of
  a 1 s iteration next to a job of 0.1 s iterations keeps its 1 s and the other job gets the
  remaining 60% of the GPU (0.1 / 0.6 s per iteration);
- a job with long iterations next to a gated worker makes it wait a whole turn: busy 0.4 s of
  1 s next to a 1 s job, both take 1.4 s. SPB makes this cheaper than full backprop, where
  both would take 2 s.

GPU time is conserved (``sum_k b_kg / T_k <= 1`` on every GPU) and nobody is faster than
alone. The per-GPU equation is solved exactly (it is piecewise linear); gangs sharing GPUs
couple through ``T``, so the system is solved by Gauss-Seidel sweeps over the gangs.
Communication overlaps other jobs' turns (the GPU is free for them while ``j`` all-reduces),
which is why comm enters only through ``G_j``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from jigsaw.model.cluster import GpuId
from jigsaw.oracle.gang_timing import GangTiming

__all__ = ["GangTiming", "timesliced_iteration_times", "turn_cycle"]

MAX_SWEEPS = 60
TOLERANCE = 1e-9


def turn_cycle(busy_s: float, others: Sequence[tuple[float, float]]) -> float:
    """Smallest ``c > 0`` with ``c = busy_s + sum_k b_k * min(1, c / T_k)``.

    ``others`` holds ``(b_k, T_k)`` of the other occupants of the GPU. The right side is
    concave and piecewise linear in ``c`` with breakpoints at the ``T_k``; walking the
    segments from the left, the first one whose line crosses the diagonal holds the answer.
    The last segment has slope 0, so there always is one.
    """
    ordered = sorted(others, key=_second)
    constant = busy_s
    slope = sum(b / t for b, t in ordered)
    low = 0.0
    for b, t in ordered:
        if slope < 1.0:
            crossing = constant / (1.0 - slope)
            if low <= crossing <= t:
                return crossing
        constant += b
        slope -= b / t
        low = t
    return constant / (1.0 - slope) if slope < 1.0 else constant


def timesliced_iteration_times(gangs: Mapping[str, GangTiming]) -> dict[str, float]:
    """Iteration time of every gang in ``gangs`` given that they share GPUs as their
    ``busy_s`` say (a GPU named by two gangs is shared by them). Gangs sharing nothing keep
    ``alone_s`` exactly."""
    occupants: dict[GpuId, list[tuple[str, float]]] = {}
    for job_id in sorted(gangs):
        for gpu, busy in gangs[job_id].busy_s:
            occupants.setdefault(gpu, []).append((job_id, busy))
    shared: dict[str, list[tuple[float, list[str], list[float]]]] = {}
    for occupied in occupants.values():
        if len(occupied) < 2:
            continue
        for job_id, busy in occupied:
            others = [k for k, _ in occupied if k != job_id]
            loads = [b for k, b in occupied if k != job_id]
            shared.setdefault(job_id, []).append((busy, others, loads))
    times = {job_id: timing.alone_s for job_id, timing in gangs.items()}
    order = sorted(shared)
    for _ in range(MAX_SWEEPS):
        moved = 0.0
        for job_id in order:
            cycle = gangs[job_id].alone_s
            for busy, others, loads in shared[job_id]:
                pairs = [(b, times[k]) for k, b in zip(others, loads, strict=True)]
                cycle = max(cycle, turn_cycle(busy, pairs))
            moved = max(moved, abs(cycle - times[job_id]) / times[job_id])
            times[job_id] = cycle
        if moved < TOLERANCE:
            break
    return times


def _second(pair: tuple[float, float]) -> float:
    return pair[1]
