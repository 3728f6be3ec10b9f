"""A lease's samples/s means the same under every plan type: the global samples the job's data
order consumed, over the lease's wall time (the slowest rank's), however the engine splits a
batch into stages, replicas or micro-batches."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from jigsaw.model.parallelism import PipelinePlan
from jigsaw.model.plan import Plan, SPBPlan
from worker.runtime.gang_worker import build_lease_trainer
from worker.runtime.messages import GangConfig, LeaseReport
from worker.runtime.summary import summarize
from worker.spb.thread_collectives import run_threads

PER_WORKER_BATCH = 8
CHUNKS = [1, 3, 2]  # as a gang runs a lease: one step, then up to each control point
PLANS: dict[str, Plan] = {
    "data x 2": SPBPlan((0, 0), 4),
    "data x 2, spb": SPBPlan((0, 2), 4),
    "2bw 2 stages x 1": PipelinePlan.for_workers(4, 2, 1, 2),
    "2bw 2 stages x 2, m 4": PipelinePlan.for_workers(4, 4, 2, 4),
    "gpipe 4 stages x 1": PipelinePlan(4, ((1, 1), (2, 2), (3, 3), (4, 4)), 4, 1, "gpipe"),
}


def lease(plan: Plan, tmp_path: Path) -> list[dict[str, Any]]:
    config = GangConfig(
        job_id="j",
        attempt=1,
        model="mlp",
        world_size=plan.num_workers,
        plan=plan,
        batch_size=PER_WORKER_BATCH,
        learning_rate=0.05,
        seed=1,
        iterations=100,
        checkpoint_root=str(tmp_path),
        restore_from=None,
        device="cpu",
    )

    def body(rank: int, comm: Any) -> dict[str, Any]:
        trainer = build_lease_trainer(config, comm, "cpu")
        began = time.perf_counter()
        runs = [trainer.run(n, lambda _: None) for n in CHUNKS]
        wall = time.perf_counter() - began
        sampler = trainer.trainer.sampler  # type: ignore[attr-defined]
        return {
            "runs": runs,
            "wall": wall,
            "kind": trainer.kind,
            "describe": trainer.describe_plan(),
            "plan": trainer.current_plan(),
            "consumed": (sampler.epoch, sampler.offset),
        }

    return run_threads(plan.num_workers, body)


def report(rank: int, result: dict[str, Any]) -> LeaseReport:
    runs = result["runs"]
    return LeaseReport(
        job_id="j",
        attempt=1,
        rank=rank,
        lease=0,
        start_iteration=0,
        end_iteration=sum(CHUNKS),
        plan_version=0,
        plan=result["plan"],
        num_blocks=4,
        switches=(),
        stopped=False,
        losses=tuple(loss for r in runs for loss in r.losses),
        samples=sum(r.samples for r in runs),
        compute_s=sum(r.compute_s for r in runs),
        sync_s=sum(r.sync_s for r in runs),
        iteration_s=sum(r.iteration_s for r in runs),
        steps_wall_s=result["wall"],
        wall_s=result["wall"],
        control_s=0.0,
        saved_activation_bytes=0,
        peak_memory_bytes=0,
        bytes_sent=0,
    )


@pytest.mark.parametrize("name", list(PLANS))
def test_samples_per_second_is_the_global_samples_consumed_over_the_wall_time(
    name: str, tmp_path: Path
) -> None:
    plan = PLANS[name]
    results = lease(plan, tmp_path)
    iterations = sum(CHUNKS)
    global_batch = PER_WORKER_BATCH * plan.num_workers
    # What the data order consumed: every rank that reads data agrees, and it is the job's
    # global batch (per-worker batch x workers, the same under every plan type) per iteration.
    consumed = {r["consumed"] for r in results if r["consumed"] != (0, 0)}
    assert consumed == {(0, iterations * global_batch)}, (name, consumed)
    outcome = summarize([report(rank, r) for rank, r in enumerate(results)])
    wall = max(r["wall"] for r in results)
    assert outcome.throughput == pytest.approx(iterations * global_batch / wall, rel=1e-12)
    assert outcome.iterations_per_s == pytest.approx(iterations / wall, rel=1e-12)
