"""The lease seam without Ray: each adapter over its engine on thread-simulated ranks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from jigsaw.model.hardware import preset
from jigsaw.model.numerics import GIB
from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from jigsaw.model.plan import Plan, SPBPlan
from jigsaw.oracle.memory import WorkerMemory
from jigsaw.oracle.parallel_profile import parallel_profile_of
from jigsaw.oracle.plan_predictions import predict_data_parallel, predict_plan, replica_batch
from jigsaw.oracle.profile_catalog import ProfileCatalog
from tests.worker.gang_configs import gang_config
from tests.worker.pipeline_support import collect_weights, max_difference, reference_weights
from worker.pipeline import PipelineConfig
from worker.runtime.failures import classify
from worker.runtime.gang_worker import build_lease_trainer
from worker.runtime.lease_trainer import LeaseTrainer, PlanChangeRefused, RunOutcome
from worker.runtime.memory_limit import WorkerMemoryExceeded, check_worker_memory
from worker.runtime.messages import GangConfig
from worker.spb.thread_collectives import run_threads
from worker.zoo import load_workload

PIPELINE = PipelinePlan.for_workers(num_blocks=4, num_workers=4, replicas=2, micro_batches=2)
HYBRID = HybridPlan.suffix(num_blocks=4, num_workers=4, first_sharded=2)


def drive(config: GangConfig, chunks: list[int], save: str | None = None) -> list[dict[str, Any]]:
    def body(rank: int, comm: Any) -> dict[str, Any]:
        trainer: LeaseTrainer = build_lease_trainer(config, comm, "cpu")
        if config.restore_from is not None:
            trainer.load_checkpoint(Path(config.restore_from))
        seen: list[int] = []
        runs: list[RunOutcome] = [trainer.run(n, seen.append) for n in chunks]
        if save is not None:
            trainer.save_checkpoint(Path(save))
        score = trainer.evaluate(None)
        engine: Any = trainer.trainer  # type: ignore[attr-defined]
        return {
            "kind": trainer.kind,
            "runs": runs,
            "seen": seen,
            "iteration": trainer.iteration,
            "score": score,
            "static": trainer.static_memory_bytes(),
            "weights": engine.named_weights() if trainer.kind != "spb" else None,
            "stage": getattr(engine, "stage", None),
            "replica": getattr(engine, "replica", None),
        }

    return run_threads(config.world_size, body)


def reference_accuracy(weights: dict[str, torch.Tensor], seed: int) -> float:
    workload = load_workload("mlp", seed=seed)
    model = nn.Sequential(*workload.blocks)
    model.load_state_dict(weights)
    held = workload.make_data().eval
    assert held is not None
    inputs, targets = held.fetch(torch.arange(len(held)))
    with torch.no_grad():
        return float((model(inputs).argmax(-1) == targets).float().mean())


def test_pipeline_lease_runs_chunks_reports_losses_on_last_stages_and_evaluates(
    tmp_path: Path,
) -> None:
    config = gang_config(PIPELINE, tmp_path)
    results = drive(config, [1, 4, 5])
    assert [r["kind"] for r in results] == ["pipeline"] * 4
    for r in results:
        assert r["iteration"] == 10 and r["seen"] == [1, 5, 10]
        last = r["stage"] == PIPELINE.num_stages - 1
        assert [len(run.losses) for run in r["runs"]] == ([1, 4, 5] if last else [0, 0, 0])
        # This stage's share: 2 weight versions + gradient + momentum, measured after a step.
        assert r["runs"][-1].peak_memory_bytes >= r["static"] > 0
    # Global batch as data parallelism: 8 per worker -> 16 per replica of 2 stages.
    assert sum(run.samples for r in results for run in r["runs"]) == 10 * 8 * 4
    last_stage = next(r for r in results if r["stage"] == 1 and r["replica"] == 0)
    losses = [loss for run in last_stage["runs"] for loss in run.losses]
    assert losses[-1] < losses[0], losses
    # Evaluation: the score of the newest weights, reported by rank 0 alone.
    want = reference_accuracy(collect_weights(results), config.seed)
    assert results[0]["score"] == pytest.approx(want, abs=1e-6)
    assert [r["score"] for r in results[1:]] == [None] * 3


def test_a_2bw_job_through_the_lease_seam_is_the_single_process_2bw_rule(tmp_path: Path) -> None:
    """The planner's 2-stage pipeline for mlp on 2 workers, run as a gang runs it (one step,
    then up to each control point, draining at every chunk) over 50 iterations (two epoch
    boundaries at a global batch of 64), equals one process applying the 2BW rule
    W(t+1) = W(t) - lr * SGD-momentum(grad f(W(t-1))) to the same global batches. At lr 0.01
    the run is not chaotic, so the match is to float tolerance; the job default (lr 0.05 with
    momentum 0.9) is near the delayed rule's stability edge, where rounding differences grow
    over hundreds of steps for engine and reference alike (bench/pipeline_vs_data.py)."""
    plan = PipelinePlan.for_workers(num_blocks=4, num_workers=2, replicas=1, micro_batches=2)
    config = gang_config(plan, tmp_path, batch_size=32, learning_rate=0.01, seed=1)
    results = drive(config, [1, 24, 25])
    rule = PipelineConfig(model="mlp", plan=plan, batch_size=64, lr=0.01, momentum=0.9, seed=1)
    got = collect_weights(results)
    assert max_difference(got, reference_weights(rule, 50, delay=1)) < 1e-5
    # ... and is not plain data-parallel SGD: the delay is real.
    assert max_difference(got, reference_weights(rule, 50, delay=0)) > 1e-4


def test_pipeline_and_hybrid_leases_checkpoint_and_resume_exactly(tmp_path: Path) -> None:
    for plan in (PIPELINE, HYBRID):
        ckpt = str(tmp_path / plan.describe().split()[0])
        config = gang_config(plan, tmp_path)
        straight = drive(config, [3, 3])
        drive(config, [3], save=ckpt)
        resumed = drive(replace(config, restore_from=ckpt), [3])
        for a, b in zip(straight, resumed, strict=True):
            assert b["iteration"] == 6
            assert a["runs"][1].losses == b["runs"][0].losses
            for name, tensor in a["weights"].items():
                assert torch.equal(tensor, b["weights"][name]), (plan.describe(), name)


def test_plan_changes_in_place_are_refused_except_between_spb_plans(tmp_path: Path) -> None:
    def attempt(plan: Plan, new: Plan) -> list[str]:
        def body(rank: int, comm: Any) -> str:
            trainer = build_lease_trainer(gang_config(plan, tmp_path), comm, "cpu")
            try:
                trainer.switch_plan(new)
            except PlanChangeRefused as refused:
                return str(refused)
            return trainer.describe_plan()

        return run_threads(plan.num_workers, body)

    refusals = attempt(PIPELINE, HYBRID) + attempt(HYBRID, HYBRID)
    assert all("cannot change its plan in place" in text for text in refusals)
    assert all("stop it with a checkpoint" in text for text in refusals)
    spb = SPBPlan((0, 0, 0, 0), 4)
    assert "cannot switch to pipeline" in attempt(spb, PIPELINE)[0]
    # SPB plans switch in place (applied at the next step).
    assert attempt(spb, SPBPlan((0, 1, 2, 3), 4)) == [spb.describe()] * 4


def test_static_memory_counts_weight_versions_gradients_and_momentum(tmp_path: Path) -> None:
    def static(plan: Plan) -> list[int]:
        def body(rank: int, comm: Any) -> int:
            return build_lease_trainer(
                gang_config(plan, tmp_path), comm, "cpu"
            ).static_memory_bytes()

        return run_threads(plan.num_workers, body)

    full = sum(p.numel() * 4 for p in load_workload("mlp").parameters())
    assert static(SPBPlan((0, 0, 0, 0), 4)) == [3 * full] * 4  # weights, grads, momentum
    pipeline = static(PIPELINE)  # stages of blocks 1-2 and 3-4, two versions each
    assert pipeline[0] + pipeline[1] == 4 * full and pipeline[:2] == pipeline[2:]
    assert max(static(HYBRID)) < 3 * full  # blocks 2-4 are split four ways


def test_the_memory_a_worker_enforces_is_the_memory_the_oracle_predicts(tmp_path: Path) -> None:
    """One formula (jigsaw.oracle.memory.worker_memory) on both sides: for every plan type,
    what each rank checks against the limit before its first step (weights, gradients,
    optimizer state) is the oracle's prediction for that rank without activations; the
    shipped mlp profile's parameter bytes are the model's exactly."""
    profile = ProfileCatalog().get("mlp")
    layers = parallel_profile_of(profile)
    assert layers is not None
    hardware = preset("cpu")

    def model_state(memory: WorkerMemory) -> int:
        return memory.params + memory.gradients + memory.optimizer

    def static(plan: Plan) -> list[int]:
        def body(rank: int, comm: Any) -> int:
            return build_lease_trainer(
                gang_config(plan, tmp_path), comm, "cpu"
            ).static_memory_bytes()

        return run_threads(plan.num_workers, body)

    data = predict_data_parallel(profile, hardware, 4, 8)
    assert static(SPBPlan((0, 1, 2, 3), 4)) == [model_state(m) for m in data.per_worker_memory]
    pipeline = predict_plan(layers, hardware, PIPELINE, replica_batch(PIPELINE, 8))
    assert static(PIPELINE) == [model_state(m) for m in pipeline.per_worker_memory]
    hybrid = predict_plan(layers, hardware, HYBRID, 8)  # the largest shard, on every rank
    assert max(static(HYBRID)) == model_state(hybrid.per_worker_memory[0])


def test_the_memory_limit_names_both_figures_and_is_not_retried() -> None:
    check_worker_memory(GIB // 4, GIB // 4, "at the limit")
    check_worker_memory(10 * GIB, None, "no limit")
    with pytest.raises(WorkerMemoryExceeded) as caught:
        check_worker_memory(int(0.3 * GIB), GIB // 4, "before the first step")
    text = str(caught.value)
    assert "needs 0.3 GiB per worker" in text and "limit 0.25 GiB" in text
    assert "use parallelism: pipeline or hybrid" in text
    failure = classify(caught.value)
    assert not failure.retryable and failure.reason == text
