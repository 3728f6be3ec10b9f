"""Turn one lease's per-rank reports into the metrics of a ``Progressed`` event.

Keys the control plane stores as a progress sample: ``loss`` (mean over the lease's iterations
and all ranks), ``throughput`` (samples per second over the whole gang), ``plan`` (depths in
force at the end of the lease); the rest describe where time, memory and traffic went.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean
from typing import Any

from worker.runtime.messages import LeaseReport


class InconsistentLeaseError(RuntimeError):
    """Ranks of one gang disagree about where a lease ended: they left lockstep."""


def lease_overhead_s(report: LeaseReport) -> float:
    """Control-plane time of one lease on one rank: idle time before it, agreeing on control
    points and assembling the report; training, checkpoint and evaluation excluded."""
    busy = report.steps_wall_s + report.checkpoint_s + report.eval_s
    return max(report.wall_s - busy, 0.0) + report.idle_before_s


def summarize(reports: Sequence[LeaseReport]) -> dict[str, Any]:
    ordered = sorted(reports, key=lambda r: r.rank)
    ends = {r.end_iteration for r in ordered}
    if len(ends) != 1:
        raise InconsistentLeaseError(
            f"ranks ended lease {ordered[0].lease} at different iterations {sorted(ends)}"
        )
    plans = {(r.plan, r.plan_text, r.switches) for r in ordered}
    if len(plans) != 1:
        raise InconsistentLeaseError(
            f"ranks ended lease {ordered[0].lease} on different plans {sorted(plans)}"
        )
    head = ordered[0]
    iterations = head.end_iteration - head.start_iteration
    wall = max(r.wall_s for r in ordered)
    losses = [loss for r in ordered for loss in r.losses]
    last_losses = [r.losses[-1] for r in ordered if r.losses]
    samples = sum(r.samples for r in ordered)
    per_iteration = [r.iteration_s / iterations for r in ordered] if iterations else []
    metrics: dict[str, Any] = {
        "lease": head.lease,
        "attempt": head.attempt,
        "lease_iterations": iterations,
        "plan": list(head.plan),
        "plan_kind": head.plan_kind,
        "plan_text": head.plan_text,
        "num_blocks": head.num_blocks,
        "plan_version": head.plan_version,
        "loss": fmean(losses) if losses else None,
        "last_loss": fmean(last_losses) if last_losses else None,
        "throughput": samples / wall if wall > 0 and samples else 0.0,
        "iterations_per_s": iterations / wall if wall > 0 and iterations else 0.0,
        "iteration_time_s": max(per_iteration) if per_iteration else None,
        "per_rank_compute_s": [r.compute_s / iterations if iterations else 0.0 for r in ordered],
        "per_rank_sync_s": [r.sync_s / iterations if iterations else 0.0 for r in ordered],
        "saved_activation_bytes": [r.saved_activation_bytes for r in ordered],
        "peak_memory_bytes": [r.peak_memory_bytes for r in ordered],
        "bytes_sent": [r.bytes_sent for r in ordered],
        "lease_wall_s": wall,
        "steps_wall_s": max(r.steps_wall_s for r in ordered),
        "eval_s": max(r.eval_s for r in ordered),
        "control_s": max(r.control_s for r in ordered),
        "checkpoint_s": max(r.checkpoint_s for r in ordered),
        "lease_overhead_s": max(lease_overhead_s(r) for r in ordered),
        "lease_overhead_fraction": max(
            lease_overhead_s(r) / r.steps_wall_s if r.steps_wall_s > 0 else 0.0 for r in ordered
        ),
    }
    if head.block_noise:
        # Identical on every rank (computed from the same reduced buffers): rank 0's suffices.
        metrics["block_noise"] = [entry.as_dict() for entry in head.block_noise]
    if head.probe_iterations:
        metrics["probe_iterations"] = head.probe_iterations
    if head.switches:
        metrics["plan_switches"] = [list(switch) for switch in head.switches]
        metrics["plan_switched_at"] = head.switches[-1][1]
    for report in ordered:
        metrics.update(report.metrics)
    return metrics
