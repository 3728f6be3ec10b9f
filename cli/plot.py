"""Figures for `jigsaw-cli simulate --plot`: JCT CDF and GPU utilization over time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from jigsaw.model.lifecycle import JobState
from jigsaw.simulator.replay_result import ReplayResult

UTILIZATION_BINS = 400


def plot_results(results: Sequence[ReplayResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (cdf_axis, util_axis) = plt.subplots(1, 2, figsize=(12, 4.5))
    for result in results:
        jcts = sorted(
            (job.finished_at - job.submitted_at) / 3600.0
            for job in result.store.all_jobs()
            if job.state == JobState.SUCCEEDED and job.finished_at is not None
        )
        if jcts:
            fractions = [(i + 1) / len(jcts) for i in range(len(jcts))]
            cdf_axis.step(jcts, fractions, where="post", label=result.policy)
        series = result.timeline.series(result.first_submit, result.last_finish, UTILIZATION_BINS)
        util_axis.plot(
            [(t - result.first_submit) / 86400.0 for t, _ in series],
            [busy / result.num_gpus for _, busy in series],
            label=result.policy,
            linewidth=0.8,
        )
    cdf_axis.set_xscale("log")
    cdf_axis.set_xlabel("job completion time (hours, log)")
    cdf_axis.set_ylabel("fraction of jobs")
    cdf_axis.set_title("JCT CDF")
    util_axis.set_xlabel("days since the first arrival")
    util_axis.set_ylabel("busy GPUs / GPUs")
    util_axis.set_ylim(0, 1.05)
    util_axis.set_title("GPU utilization")
    for axis in (cdf_axis, util_axis):
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
