"""digits_wide_mlp needs a pipeline or hybrid plan under a 0.25 GiB per-worker limit: measured
by the engines on four thread ranks (one iteration each), not computed from its size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jigsaw.model.numerics import GIB
from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from jigsaw.model.plan import Plan, SPBPlan
from worker.runtime.gang_worker import build_lease_trainer
from worker.runtime.memory_limit import WorkerMemoryExceeded, check_worker_memory
from worker.runtime.messages import GangConfig
from worker.spb.thread_collectives import run_threads

MODEL = "digits_wide_mlp"
LIMIT = GIB // 4
WORKERS = 4
PLANS: dict[str] = {
    "data": SPBPlan((0,) * WORKERS, 4),
    "pipeline": PipelinePlan.for_workers(4, WORKERS, replicas=1, micro_batches=4),
    "pipeline_2x2": PipelinePlan.for_workers(4, WORKERS, replicas=2, micro_batches=2),
    "hybrid": HybridPlan.suffix(4, WORKERS, first_sharded=1),
}


def config(plan: Plan, tmp_path: Path, **changes: Any) -> GangConfig:
    values: dict[str, Any] = {
        "job_id": "wide",
        "attempt": 1,
        "model": MODEL,
        "world_size": WORKERS,
        "plan": plan,
        "batch_size": 32,
        "learning_rate": 0.01,
        "seed": 0,
        "iterations": 1000,
        "checkpoint_root": str(tmp_path),
        "restore_from": None,
        "device": "cpu",
        **changes,
    }
    return GangConfig(**values)


def measured_peaks(plan: Plan, tmp_path: Path, iterations: int = 1) -> list[int]:
    def body(rank: int, comm: Any) -> int:
        trainer = build_lease_trainer(config(plan, tmp_path), comm, "cpu")
        return trainer.run(iterations, lambda _: None).peak_memory_bytes

    return run_threads(WORKERS, body)


def test_data_parallel_exceeds_the_limit_and_pipeline_and_hybrid_fit(tmp_path: Path) -> None:
    peaks = {name: max(measured_peaks(plan, tmp_path)) for name, plan in PLANS.items()}
    assert peaks["data"] > LIMIT, peaks
    with pytest.raises(WorkerMemoryExceeded, match="use parallelism: pipeline or hybrid"):
        check_worker_memory(peaks["data"], LIMIT, "measured")
    for name in ("pipeline", "pipeline_2x2", "hybrid"):
        assert peaks[name] < LIMIT, (name, peaks)
    # Sharding four ways or a stage of one block each cuts a worker's share well below half.
    assert peaks["pipeline"] < peaks["data"] / 2 and peaks["hybrid"] < peaks["data"] / 2


@pytest.mark.slow
# The pipeline's accuracy is checked through the service: test_service_parallelism.py.
@pytest.mark.parametrize(("name", "accuracy"), [("hybrid", 0.9)])
def test_it_trains_to_a_real_accuracy_under_both_plans(
    tmp_path: Path, name: str, accuracy: float
) -> None:
    """40 iterations of a 64-sample global batch (16 per worker) at lr 0.01: 0.95 held-out
    accuracy here, as bench/parallel_training.py measured for hybrid and data parallelism with
    a 128-sample batch (0.78 for the 2BW pipeline, whose one-step weight delay slows the start;
    the pipeline on thread ranks also lands on 0.51 in some runs: its engine is not
    deterministic there, see the issue-16 worker notes in BENCHMARKS). The smaller batch halves
    the compute of this test (~0.9 s an iteration at 32 on two cores); the claim is the same."""
    plan = PLANS[name]

    def body(rank: int, comm: Any) -> tuple[float | None, list[float]]:
        trainer = build_lease_trainer(config(plan, tmp_path, batch_size=16), comm, "cpu")
        losses = trainer.run(40, lambda _: None).losses
        return trainer.evaluate(None), list(losses)

    results = run_threads(WORKERS, body)
    score = results[0][0]
    assert score is not None and score > accuracy, results[0]
    losses = next(losses for _, losses in reversed(results) if losses)
    assert losses[-1] < 0.8 * losses[0]
