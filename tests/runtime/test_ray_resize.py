"""Elastic resizes on a real local Ray, through the real cycle: a gang checkpoints at a lease
boundary and a gang of the new size (its own placement group) restores it.

- A ``fixed``-batch MLP (no BatchNorm) resized 4 -> 2 -> 3 workers holds, when stopped, the
  same weights as one process that trained the same global batch for as many iterations: the
  sampler's position counts global samples, so every global batch is the same set of samples
  whatever the size (across epoch ends too), and the optimizer's momentum is carried.
- A worker that dies as the resized gang comes up: the gang is retried and resumes from the
  resize's checkpoint, not from the start.
- A resize whose placement Ray cannot reserve goes back to the last size, with an event.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch

from jigsaw.model.executor_events import Progressed
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import full_backprop
from jigsaw.model.reasons import ReasonCode
from tests.runtime.support import ScriptedResizePolicy, make_harness
from worker.runtime.checkpoints import CheckpointStore
from worker.spb import SPBTrainer, TrainerConfig
from worker.spb.sampler import GlobalBatchSampler
from worker.spb.thread_collectives import ThreadGroup

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("local_ray")]

GLOBAL_BATCH = 48
"""Divisible by 2, 3 and 4; about 30 iterations per epoch of digits, so the run crosses
epoch ends at every size."""
ELASTIC = {
    "model": "mlp",
    "spb": "none",
    "min_workers": 2,
    "max_workers": 4,
    "learning_rate": 0.05,
    "seed": 3,
}


def codes(h: object, job_id: str) -> list[str]:
    return [str(e.code) for e in h.store.events(job_id)]  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_fixed_batch_run_resized_4_2_3_ends_with_the_weights_of_a_run_never_resized(
    tmp_path: Path,
) -> None:
    h = make_harness(tmp_path, policy=ScriptedResizePolicy([(20, 2), (50, 3)], stop_at=90))
    try:
        h.submit("el", workers=4, batch_size=GLOBAL_BATCH // 4, iterations=400, **ELASTIC)
        h.run_until(
            lambda: h.store.get("el").state == JobState.PREEMPTED and h.executor.gang("el") is None,
            timeout_s=300,
        )
        events = h.store.events("el")
        resized = [e for e in events if e.code == ReasonCode.RESIZED]
        assert [e.reason.split(" at ")[0] for e in resized] == [
            "test: 4 -> 2 workers",
            "test: 2 -> 3 workers",
        ], [(e.code, e.reason) for e in events]
        assert h.store.get("el").worker_batch == GLOBAL_BATCH // 3
        latest = CheckpointStore(tmp_path / "ckpt", "el").latest()
        assert latest is not None
        stopped_at, directory = latest
        assert stopped_at >= 90
        saved = torch.load(directory / "shared.pt", weights_only=False)
        assert saved["sampler"]["epoch"] >= 2  # the resizes straddle epoch ends
    finally:
        h.executor.shutdown()

    reference = SPBTrainer(
        TrainerConfig(
            model="mlp", plan=full_backprop(1, 4), batch_size=GLOBAL_BATCH, lr=0.05, seed=3
        ),
        ThreadGroup(1).collectives(0),
    )

    def largest_difference() -> float:
        worst = 0.0
        for block, state in zip(reference.blocks, saved["blocks"], strict=True):
            for name, value in block.state_dict().items():
                worst = max(worst, float((value - state[name]).abs().max()))
        return worst

    reference.run(stopped_at - 1)
    one_step_short = largest_difference()
    reference.run(1)
    same_iteration = largest_difference()
    print(f"after {stopped_at} iterations: {same_iteration:.2e}; one short: {one_step_short:.2e}")
    assert same_iteration < 1e-4, f"weights differ by {same_iteration} at {stopped_at}"
    assert one_step_short > 100 * same_iteration  # the tolerance tells one step apart
    assert saved["optimizer"]["state"], "the optimizer state travels in the checkpoint"


@pytest.mark.slow
def test_a_worker_death_during_a_resize_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    h = make_harness(tmp_path, policy=ScriptedResizePolicy([(20, 3)]))
    try:
        # Long enough that the resized gang is still running when the test looks for it (at
        # 80 iterations a loaded box once saw it start and finish between two looks).
        h.submit("el", workers=2, batch_size=GLOBAL_BATCH // 2, iterations=600, **ELASTIC)
        h.run_until(lambda: ReasonCode.RESIZED in codes(h, "el"), timeout_s=180)
        checkpoint = CheckpointStore(tmp_path / "ckpt", "el")

        def new_gang_up() -> bool:
            gang = h.executor.gang("el")
            return gang is not None and len(gang.placement) == 3 and gang.started_at is not None

        h.run_until(new_gang_up, timeout_s=180)
        resized_from = checkpoint.latest()
        assert resized_from is not None
        gang = h.executor.gang("el")
        assert gang is not None
        os.kill(gang.pids()[2].pid, signal.SIGKILL)
        h.run_until(h.all_terminal, timeout_s=240)
        job = h.store.get("el")
        assert job.state == JobState.SUCCEEDED, job.reason
        assert job.failures == 1 and job.attempt == 2 and len(job.placement) == 0
        retried = [it for attempt, it in h.progress_of("el") if attempt == 2]
        assert retried and min(retried) > resized_from[0]  # resumed, not restarted from 0
        assert job.iterations_done == 600
    finally:
        h.executor.shutdown()


@pytest.mark.slow
def test_a_resize_that_cannot_be_placed_goes_back_to_the_last_size(tmp_path: Path) -> None:
    # The scheduler believes in 6 GPUs; local Ray has 4 and each worker reserves a whole
    # one, so 5 workers are never reserved.
    h = make_harness(
        tmp_path,
        gpus=6,
        policy=ScriptedResizePolicy([(20, 5)]),
        resize_placement_timeout_s=3,
        gpu_per_worker=1.0,
    )
    try:
        h.submit("el", workers=2, batch_size=30, iterations=300, **{**ELASTIC, "max_workers": 5})
        h.run_until(h.all_terminal, timeout_s=240)
        job = h.store.get("el")
        assert job.state == JobState.SUCCEEDED, job.reason
        assert codes(h, "el").count(str(ReasonCode.RESIZE_REVERTED)) == 1
        reverted = next(e for e in h.store.events("el") if e.code == ReasonCode.RESIZE_REVERTED)
        assert "resize to 5 workers could not start" in reverted.reason
        assert "back to 2 workers" in reverted.reason
        assert job.worker_batch == 30 and job.failures == 0 and job.attempt == 1
        last = [e for e in h.events if isinstance(e, Progressed)][-1]
        assert len(last.metrics["plan"]) == 2 and last.iterations_done == 300
    finally:
        h.executor.shutdown()


@pytest.mark.slow
def test_an_adaptive_run_equals_one_process_applying_its_batch_and_rate_changes(
    tmp_path: Path,
) -> None:
    """Global batch 24 -> 48 (4 workers) -> 24 (3 workers): each resized gang sets its SGD
    learning rate by AdaScale from the job's own gradient noise. One process that changes its
    batch and learning rate to the same values at the same iterations (read back from the
    run's checkpoints) ends with the same weights."""
    h = make_harness(
        tmp_path,
        policy=ScriptedResizePolicy([(20, 4, 48), (50, 3, 24)], stop_at=90),
        checkpoints_kept=100,
    )
    adaptive = {**ELASTIC, "batch_policy": "adaptive", "min_global_batch": 12}
    try:
        h.submit("ad", workers=2, batch_size=12, iterations=400, max_global_batch=96, **adaptive)
        h.run_until(
            lambda: h.store.get("ad").state == JobState.PREEMPTED and h.executor.gang("ad") is None,
            timeout_s=300,
        )
    finally:
        h.executor.shutdown()
    phases: list[tuple[int, int, float]] = []  # (from iteration, global batch, learning rate)
    previous: tuple[int, int] | None = None
    for iteration, directory in CheckpointStore(tmp_path / "ckpt", "ad").complete():
        saved = torch.load(directory / "shared.pt", weights_only=False)
        world = len(saved["plan"])
        batch = saved["config"]["batch_size"] * world
        rate = saved["optimizer"]["param_groups"][0]["lr"]
        if previous is None:
            phases.append((0, batch, rate))
        elif batch != phases[-1][1]:
            phases.append((previous[0], batch, rate))  # restored from the checkpoint before
        previous = (iteration, batch)
    assert [batch for _, batch, _ in phases] == [24, 48, 24], phases
    assert phases[0][2] == 0.05 and phases[2][2] == 0.05  # the base batch: the tuned rate
    assert 0.05 < phases[1][2] <= 0.1, phases  # AdaScale: between no gain and linear
    stopped_at, last = CheckpointStore(tmp_path / "ckpt", "ad").complete()[-1]
    saved = torch.load(last / "shared.pt", weights_only=False)

    reference = SPBTrainer(
        TrainerConfig(model="mlp", plan=full_backprop(1, 4), batch_size=24, lr=0.05, seed=3),
        ThreadGroup(1).collectives(0),
    )
    bounds = [start for start, _, _ in phases[1:]] + [stopped_at]
    for (start, batch, rate), end in zip(phases, bounds, strict=True):
        position = reference.sampler.state_dict()
        reference.sampler = GlobalBatchSampler(len(reference.data.train), batch, 1, 3)
        reference.sampler.load_state_dict(position)
        for group in reference.optimizer.param_groups:
            group["lr"] = rate
        reference.run(end - start)
    worst = max(
        float((value - state[name]).abs().max())
        for block, state in zip(reference.blocks, saved["blocks"], strict=True)
        for name, value in block.state_dict().items()
    )
    print(f"phases (from, global batch, lr): {phases}; weights {worst:.2e} at {stopped_at}")
    assert worst < 1e-4, f"weights differ by {worst} after {stopped_at} iterations ({phases})"
