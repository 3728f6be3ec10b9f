"""PipeDream-2BW pipeline engine: 2BW semantics, weight stashing, replicas, checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.parallelism import PipelinePlan
from tests.worker.pipeline_support import (
    collect_weights,
    gloo_body,
    max_difference,
    mlp_config,
    reference_weights,
    train_in_leases,
)
from worker.pipeline.schedule import one_f_one_b
from worker.spb.checkpoint import CheckpointError
from worker.spb.launch import spawn_local
from worker.spb.thread_collectives import run_threads

TOLERANCE = 1e-5
PLAN = PipelinePlan.for_workers(num_blocks=4, num_workers=4, replicas=2, micro_batches=4)


def run(config, leases, **kwargs):  # type: ignore[no-untyped-def]
    return run_threads(
        config.plan.num_workers,
        lambda rank, comm: train_in_leases(rank, comm, config, leases, **kwargs),
    )


def test_one_f_one_b_keeps_at_most_stages_minus_stage_in_flight() -> None:
    ops = one_f_one_b(stage=0, num_stages=3, num_micro_batches=6)
    assert ops[:3] == [("F", 0), ("F", 1), ("F", 2)]
    assert ops[3] == ("B", 0)
    assert [j for k, j in ops if k == "B"] == list(range(6))
    in_flight = peak = 0
    for kind, _ in ops:
        in_flight += 1 if kind == "F" else -1
        peak = max(peak, in_flight)
    assert peak == 3
    assert one_f_one_b(stage=2, num_stages=3, num_micro_batches=2) == [
        ("F", 0),
        ("B", 0),
        ("F", 1),
        ("B", 1),
    ]


def test_2bw_pipeline_with_replicas_equals_the_single_process_2bw_reference() -> None:
    config = mlp_config(PLAN)
    results = run(config, [2, 3])  # a drain between leases must not change anything
    want = reference_weights(config, 5, delay=1)
    for replica in range(PLAN.replicas):
        diff = max_difference(collect_weights(results, replica), want)
        assert diff <= TOLERANCE, f"replica {replica}: max |pipeline - 2BW reference| = {diff}"
    # ... and the delay is real: plain data-parallel SGD ends somewhere else.
    assert max_difference(collect_weights(results), reference_weights(config, 5, 0)) > 1e-3
    # Two weight versions at most, the loss goes down on the last stage.
    for result in results:
        assert max(m["weight_versions"] for m in result["metrics"]) == 2
    last = next(r for r in results if r["stage"] == PLAN.num_stages - 1 and r["replica"] == 0)
    assert len(last["losses"]) == 5 and last["losses"][-1] < last["losses"][0]


def test_without_weight_stashing_the_pipeline_leaves_the_2bw_semantics() -> None:
    config = mlp_config(PLAN, stash_weights=False)
    results = run(config, [5])
    diff = max_difference(collect_weights(results), reference_weights(config, 5, delay=1))
    assert diff > 100 * TOLERANCE, f"backward on the newest weights should diverge, got {diff}"


def test_gpipe_flush_equals_data_parallel_sgd_with_one_version() -> None:
    plan = PipelinePlan.for_workers(4, 4, replicas=2, micro_batches=2, schedule="gpipe")
    config = mlp_config(plan)
    results = run(config, [4])
    diff = max_difference(collect_weights(results), reference_weights(config, 4, delay=0))
    assert diff <= TOLERANCE
    assert all(m["weight_versions"] == 1 for r in results for m in r["metrics"])


def test_checkpoint_restores_both_versions_and_the_run_continues_exactly(tmp_path: Path) -> None:
    config = mlp_config(PLAN)
    checkpoint = str(tmp_path / "ckpt")
    full = run(config, [3, 3], checkpoint_after=0, checkpoint_dir=checkpoint)
    resumed = run(config, [3], resume_from=checkpoint)
    for a, b in zip(full, resumed, strict=True):
        assert a["losses"][3:] == b["losses"]
        for name, tensor in a["weights"].items():
            assert torch.equal(tensor, b["weights"][name]), name
    stage0 = torch.load(tmp_path / "ckpt" / "stage0.pt", weights_only=False)
    assert sorted(stage0["versions"]) == [2, 3]  # W(t-1) for the next batch, and W(t)


@pytest.mark.distributed
@pytest.mark.slow
def test_2bw_over_gloo_processes_equals_the_reference_and_resumes(tmp_path: Path) -> None:
    config = mlp_config(PLAN)
    ckpt = str(tmp_path / "ckpt")
    # One process group (a spawn of four ranks costs ~20 s): train 2+2 iterations with a
    # checkpoint after the first lease, then a fresh trainer resumes from that checkpoint.
    jobs = [(config, [2, 2], 0, ckpt), (config, [2], None, None, ckpt)]
    spawn_local(gloo_body, PLAN.num_workers, str(tmp_path), jobs)
    runs = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(4)]
    first, again = [run[0] for run in runs], [run[1] for run in runs]
    diff = max_difference(collect_weights(first), reference_weights(config, 4, delay=1))
    assert diff <= TOLERANCE, f"max |gloo pipeline - 2BW reference| = {diff}"
    for a, b in zip(first, again, strict=True):
        assert a["losses"][2:] == b["losses"]
        for name, tensor in a["weights"].items():
            assert torch.equal(tensor, b["weights"][name]), name


def test_bad_batch_and_a_checkpoint_of_another_plan_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match="not a multiple of 4 micro-batches") as caught:
        run(mlp_config(PLAN, batch_size=10), [1])
    assert caught.value.field == "batch_size"
    checkpoint = str(tmp_path / "ckpt")
    run(mlp_config(PLAN), [1], checkpoint_after=0, checkpoint_dir=checkpoint)
    other = PipelinePlan.for_workers(4, 4, replicas=1, micro_batches=4)
    with pytest.raises(CheckpointError, match="under 'pipeline"):
        run(mlp_config(other), [1], resume_from=checkpoint)
    with pytest.raises(CheckpointError, match="not a complete checkpoint"):
        run(mlp_config(PLAN), [1], resume_from=str(tmp_path / "missing"))
