"""Turn one lease's per-rank reports into the typed outcome of a ``Progressed`` event
(:class:`jigsaw.model.lease_outcome.LeaseOutcome`): ``loss`` (mean over the lease's iterations and
all
ranks), ``throughput`` (samples per second over the whole gang), ``plan`` (in force at the end of
the lease, the typed :data:`~jigsaw.model.plan.Plan` the workers report); the rest describe
where time, memory and traffic went.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from statistics import fmean

from jigsaw.model.lease_outcome import LeaseOutcome, LeaseTimings, RankCosts
from worker.runtime.messages import LeaseReport

log = logging.getLogger(__name__)


class InconsistentLeaseError(RuntimeError):
    """Ranks of one gang disagree about where a lease ended: they left lockstep."""


def lease_overhead_s(report: LeaseReport) -> float:
    """Control-plane time of one lease on one rank: idle time before it, agreeing on control
    points and assembling the report; training, checkpoint and evaluation excluded."""
    busy = report.steps_wall_s + report.checkpoint_s + report.eval_s
    return max(report.wall_s - busy, 0.0) + report.idle_before_s


def summarize(reports: Sequence[LeaseReport]) -> LeaseOutcome:
    """The gang's lease as one typed outcome: where a worker's report enters the control plane,
    so its plan and block count are checked here and its gradient statistics are validated
    here, once (refused statistics become ``noise_refused``, see :class:`LeaseOutcome`)."""
    ordered = sorted(reports, key=lambda r: r.rank)
    ends = {r.end_iteration for r in ordered}
    if len(ends) != 1:
        raise InconsistentLeaseError(
            f"ranks ended lease {ordered[0].lease} at different iterations {sorted(ends)}"
        )
    plans = {(r.plan, r.switches) for r in ordered}
    if len(plans) != 1:
        seen = sorted(f"{plan.kind} {plan.describe()} (switches {s})" for plan, s in plans)
        raise InconsistentLeaseError(
            f"ranks ended lease {ordered[0].lease} on different plans {seen}"
        )
    head = ordered[0]
    iterations = head.end_iteration - head.start_iteration
    wall = max(r.wall_s for r in ordered)
    losses = [loss for r in ordered for loss in r.losses]
    last_losses = [r.losses[-1] for r in ordered if r.losses]
    samples = sum(r.samples for r in ordered)
    per_iteration = [r.iteration_s / iterations for r in ordered] if iterations else []
    evaluation: dict[str, float] = {}
    for report in ordered:
        evaluation.update(report.metrics)
    outcome = LeaseOutcome(
        lease=head.lease,
        attempt=head.attempt,
        iterations=iterations,
        plan=head.plan,
        plan_version=head.plan_version,
        num_blocks=head.num_blocks,
        probe_iterations=head.probe_iterations,
        switches=head.switches,
        loss=fmean(losses) if losses else None,
        last_loss=fmean(last_losses) if last_losses else None,
        throughput=samples / wall if wall > 0 and samples else 0.0,
        iterations_per_s=iterations / wall if wall > 0 and iterations else 0.0,
        timings=LeaseTimings(
            wall_s=wall,
            steps_wall_s=max(r.steps_wall_s for r in ordered),
            eval_s=max(r.eval_s for r in ordered),
            control_s=max(r.control_s for r in ordered),
            checkpoint_s=max(r.checkpoint_s for r in ordered),
            overhead_s=max(lease_overhead_s(r) for r in ordered),
            overhead_fraction=max(
                lease_overhead_s(r) / r.steps_wall_s if r.steps_wall_s > 0 else 0.0 for r in ordered
            ),
            iteration_s=max(per_iteration) if per_iteration else None,
        ),
        ranks=tuple(
            RankCosts(
                compute_s=r.compute_s / iterations if iterations else 0.0,
                sync_s=r.sync_s / iterations if iterations else 0.0,
                saved_activation_bytes=r.saved_activation_bytes,
                peak_memory_bytes=r.peak_memory_bytes,
                bytes_sent=r.bytes_sent,
            )
            for r in ordered
        ),
        evaluation=evaluation,
    )
    # Identical on every rank (computed from the same reduced buffers): rank 0's suffices.
    reported = outcome.with_reported_noise(head.block_noise)
    if reported.noise_refused is not None:
        log.warning("job %s: %s", head.job_id, reported.noise_refused)
    return reported
