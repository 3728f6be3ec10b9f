"""SplitBrain-style hybrid engine: equals single-process SGD on the global batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.parallelism import HybridPlan, ShardedBlock
from worker.hybrid import HybridConfig, HybridTrainer
from worker.hybrid.checkpoint import load_hybrid, save_hybrid
from worker.hybrid.evaluate import evaluate_hybrid
from worker.spb.checkpoint import CheckpointError
from worker.spb.collectives import Collectives
from worker.spb.launch import spawn_local
from worker.spb.sampler import GlobalBatchSampler
from worker.spb.thread_collectives import run_threads
from worker.zoo import load_workload

TOLERANCE = 1e-5


def reference(config: HybridConfig, steps: int) -> dict[str, Tensor]:
    workload = load_workload(config.model, seed=config.seed)
    model = nn.Sequential(*workload.blocks)
    optimizer = torch.optim.SGD(
        model.parameters(),
        lr=config.lr,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
    )
    data = workload.make_data().train
    n = config.plan.num_workers
    samplers = [GlobalBatchSampler(len(data), config.batch_size, n, config.seed) for _ in range(n)]
    for _ in range(steps):
        parts = [data.fetch(s.next_indices(r)) for r, s in enumerate(samplers)]
        inputs, targets = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        optimizer.zero_grad()
        workload.loss(model(inputs), targets).backward()
        optimizer.step()
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def expected_shard(full: Tensor, got: Tensor, rank: int, workers: int) -> Tensor:
    """The slice of a full tensor that ``rank`` holds (equal shapes: replicated). Uneven
    splits give the first ``size % workers`` ranks one more row or column."""
    for dim, (a, b) in enumerate(zip(full.shape, got.shape, strict=True)):
        if a != b:
            base, extra = divmod(a, workers)
            start = rank * base + min(rank, extra)
            return full.narrow(dim, start, b)
    return full


def train(rank: int, comm: Collectives, config: HybridConfig, steps: int) -> dict[str, Any]:
    trainer = HybridTrainer(config, comm)
    metrics = [trainer.step().as_dict() for _ in range(steps)]
    return {"weights": trainer.named_weights(), "metrics": metrics}


def gloo_body(rank: int, comm: Collectives, out: str, config: HybridConfig, steps: int) -> None:
    torch.save(train(rank, comm, config, steps), Path(out) / f"rank{rank}.pt")


def assert_matches_reference(results: list[dict[str, Any]], config: HybridConfig, steps: int):  # type: ignore[no-untyped-def]
    want = reference(config, steps)
    for rank, result in enumerate(results):
        assert set(result["weights"]) == set(want)
        for name, got in result["weights"].items():
            expected = expected_shard(want[name], got, rank, len(results))
            diff = (got - expected).abs().max().item()
            assert diff <= TOLERANCE, f"rank {rank} {name}: |hybrid - reference| = {diff}"


@pytest.mark.parametrize("layout", ["column", "row"])
def test_sharded_classifier_equals_single_process_sgd(layout: str) -> None:
    plan = HybridPlan.suffix(num_blocks=4, num_workers=2, first_sharded=3, layout=layout)  # type: ignore[arg-type]
    config = HybridConfig("mlp", plan, batch_size=16, lr=0.1, momentum=0.9, weight_decay=1e-4)
    results = run_threads(2, lambda r, c: train(r, c, config, 12))
    assert_matches_reference(results, config, 12)
    # Sharded weights really are split: each worker holds half of fc3 and the classifier.
    full = dict(nn.Sequential(*load_workload("mlp").blocks).named_parameters())
    assert results[0]["weights"]["2.0.weight"].numel() * 2 == full["2.0.weight"].numel()
    losses = [m["loss"] for m in results[0]["metrics"]]
    assert losses[-1] < losses[0]


def test_column_then_row_layouts_and_no_data_parallel_blocks() -> None:
    # Everything sharded: the batch is gathered at the input, then column, column, row, row.
    plan = HybridPlan(
        4, 2, (ShardedBlock(1), ShardedBlock(2), ShardedBlock(3, "row"), ShardedBlock(4, "row"))
    )
    config = HybridConfig("mlp", plan, batch_size=8, lr=0.05, momentum=0.9)
    results = run_threads(2, lambda r, c: train(r, c, config, 3))
    assert_matches_reference(results, config, 3)


def test_uneven_splits_across_three_workers() -> None:
    # 128 hidden units and 10 classes do not divide by 3: shards of 43/43/42 and 4/3/3.
    plan = HybridPlan(4, 3, (ShardedBlock(3, "row"), ShardedBlock(4, "column")))
    config = HybridConfig("mlp", plan, batch_size=8, lr=0.05, momentum=0.9)
    results = run_threads(3, lambda r, c: train(r, c, config, 3))
    assert_matches_reference(results, config, 3)
    assert [r["weights"]["3.weight"].shape[0] for r in results] == [4, 3, 3]


def test_sharded_block_without_a_linear_layer_is_refused() -> None:
    plan = HybridPlan(4, 1, (ShardedBlock(3), ShardedBlock(4)))
    config = HybridConfig("digits_cnn", plan, batch_size=8)
    with pytest.raises(InvalidSpecError, match="block 3 has no linear layer") as caught:
        run_threads(1, lambda r, c: HybridTrainer(config, c))
    assert caught.value.field == "sharded"


def test_a_layer_narrower_than_the_gang_is_refused_by_the_planners_rule() -> None:
    """The engine builds its shards by the rule the planner refuses plans by at submit."""
    plan = HybridPlan.suffix(num_blocks=4, num_workers=11, first_sharded=4)
    config = HybridConfig("mlp", plan, batch_size=8)
    with pytest.raises(InvalidSpecError, match=r"out_features of 10 .* 11 workers") as caught:
        run_threads(11, lambda r, c: HybridTrainer(config, c))
    assert caught.value.field == "workers"


@pytest.mark.distributed
@pytest.mark.slow
def test_hybrid_over_gloo_processes_equals_the_reference(tmp_path: Path) -> None:
    plan = HybridPlan.suffix(num_blocks=4, num_workers=2, first_sharded=3, layout="column")
    config = HybridConfig("mlp", plan, batch_size=16, lr=0.1, momentum=0.9)
    spawn_local(gloo_body, 2, str(tmp_path), config, 3)
    results = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2)]
    assert_matches_reference(results, config, 3)
    # Each worker sent something every step (gathers, reductions), and the same on both.
    sent = [[m["bytes_sent"] for m in r["metrics"]] for r in results]
    assert sent[0] == sent[1] and min(sent[0]) > 0


def train_in_leases(
    rank: int,
    comm: Collectives,
    config: HybridConfig,
    steps: int,
    checkpoint_at: int | None = None,
    checkpoint_dir: str | None = None,
    resume_from: str | None = None,
) -> dict[str, Any]:
    trainer = HybridTrainer(config, comm)
    if resume_from is not None:
        load_hybrid(trainer, resume_from)
    losses = []
    for _ in range(steps):
        losses.append(trainer.step().loss)
        if trainer.iteration == checkpoint_at and checkpoint_dir is not None:
            save_hybrid(trainer, checkpoint_dir)
    return {
        "weights": trainer.named_weights(),
        "momentum": [s["momentum_buffer"].clone() for s in trainer.optimizer.state.values()],
        "buffers": {n: b.clone() for n, b in trainer.dp_blocks.named_buffers()},
        "losses": losses,
        "iteration": trainer.iteration,
        "accuracy": evaluate_hybrid(trainer),
    }


@pytest.mark.parametrize(("model", "first_sharded"), [("mlp", 3), ("mlp", 1), ("digits_cnn", 4)])
def test_checkpoint_restores_shards_replicated_blocks_and_optimizer_exactly(
    tmp_path: Path, model: str, first_sharded: int
) -> None:
    plan = HybridPlan.suffix(num_blocks=4, num_workers=3, first_sharded=first_sharded)
    config = HybridConfig(model, plan, batch_size=8, lr=0.1, momentum=0.9, weight_decay=1e-4)
    ckpt = str(tmp_path / "ckpt")
    full = run_threads(3, lambda r, c: train_in_leases(r, c, config, 6, 3, ckpt))
    resumed = run_threads(3, lambda r, c: train_in_leases(r, c, config, 3, resume_from=ckpt))
    for rank, (a, b) in enumerate(zip(full, resumed, strict=True)):
        assert b["iteration"] == 6
        assert a["losses"][3:] == b["losses"], f"rank {rank}: losses after resume differ"
        for name, tensor in a["weights"].items():
            assert torch.equal(tensor, b["weights"][name]), f"rank {rank} {name}"
        assert all(torch.equal(x, y) for x, y in zip(a["momentum"], b["momentum"], strict=True))
        # BatchNorm statistics of the replicated blocks are each worker's own.
        assert a["buffers"].keys() == b["buffers"].keys()
        for name, tensor in a["buffers"].items():
            assert torch.equal(tensor, b["buffers"][name]), f"rank {rank} buffer {name}"
        assert a["accuracy"] == b["accuracy"]
    if model == "digits_cnn":
        means = [r["buffers"]["0.1.running_mean"] for r in full]
        assert not torch.equal(means[0], means[1])  # so one copy for all would not do
        return
    # Each rank wrote its own shard: the sharded classifier weights differ between files.
    shards = [torch.load(tmp_path / "ckpt" / f"shard{r}.pt", weights_only=False) for r in range(3)]
    key = f"{4 - first_sharded}.weight"
    assert shards[0]["blocks"][key].shape[0] == 4 and shards[2]["blocks"][key].shape[0] == 3
    # Without the restore the run would not continue where it stopped.
    fresh = run_threads(3, lambda r, c: train_in_leases(r, c, config, 3))
    assert fresh[0]["losses"] != resumed[0]["losses"]


def test_hybrid_evaluation_matches_the_single_process_model() -> None:
    plan = HybridPlan.suffix(num_blocks=4, num_workers=3, first_sharded=3, layout="row")
    config = HybridConfig("mlp", plan, batch_size=8, lr=0.1, momentum=0.9)
    results = run_threads(3, lambda r, c: train_in_leases(r, c, config, 20))
    workload = load_workload("mlp", seed=config.seed)
    model = nn.Sequential(*workload.blocks)
    want = reference(config, 20)
    model.load_state_dict(want)
    model.eval()
    held = workload.make_data().eval
    assert held is not None
    inputs, targets = held.fetch(torch.arange(len(held)))
    expected = float((model(inputs).argmax(-1) == targets).float().mean())
    assert [r["accuracy"] for r in results] == [pytest.approx(expected, abs=1e-6)] * 3
    assert expected > 0.15  # better than chance (0.1) after 20 steps


def test_a_checkpoint_of_another_plan_is_refused(tmp_path: Path) -> None:
    plan = HybridPlan.suffix(num_blocks=4, num_workers=2, first_sharded=3)
    config = HybridConfig("mlp", plan, batch_size=8)
    ckpt = str(tmp_path / "ckpt")
    run_threads(2, lambda r, c: train_in_leases(r, c, config, 1, 1, ckpt))
    other = HybridConfig("mlp", HybridPlan.suffix(4, 2, first_sharded=2), batch_size=8)
    with pytest.raises(CheckpointError, match="under 'hybrid"):
        run_threads(2, lambda r, c: train_in_leases(r, c, other, 1, resume_from=ckpt))
    with pytest.raises(CheckpointError, match="not a complete checkpoint"):
        run_threads(2, lambda r, c: train_in_leases(r, c, config, 1, resume_from=ckpt + "x"))
