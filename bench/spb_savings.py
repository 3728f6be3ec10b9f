"""What SPB saves per rank: 4 gloo ranks, ResNet-18 at 32x32, batch 32 per rank.

Engines run side by side in the same processes, interleaved iteration by iteration in rotating
order (so machine noise hits them alike): plain torch DDP, our engine with full backprop (plan
``none``), our engine with a staircase plan, and full backprop with the saved-activation meter
off (to measure the instrumentation's overhead). Prints ONE JSON object with ``-o json``.

    python -m bench.spb_savings -o json [--iterations 6]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from bench.spb_common import add_output_flag, emit, plan_cost_ratios, provenance
from jigsaw.model.plan import resolve_plan
from worker.spb.block_costs import profile_workload
from worker.spb.collectives import Collectives, ring_all_reduce_bytes
from worker.spb.instrumentation import SavedActivationMeter, optimizer_state_bytes
from worker.spb.launch import spawn_local
from worker.spb.model_plans import model_plan
from worker.spb.sampler import GlobalBatchSampler
from worker.spb.trainer import SPBTrainer
from worker.spb.trainer_setup import TrainerConfig, build_optimizer
from worker.zoo import load_workload

ENGINES = ("ddp", "full", "spb", "full_uninstrumented")
FIGURES = (
    "forward_time_s",
    "backward_time_s",
    "sync_time_s",
    "iteration_time_s",
    "saved_activation_bytes",
    "bytes_sent",
    "peak_memory_bytes",
)


class DDPBaseline:
    """torch DDP on the same blocks, data shards and optimizer, instrumented like our engine
    (its backward time includes the all-reduce DDP overlaps with it)."""

    def __init__(self, config: TrainerConfig, rank: int, world: int) -> None:
        workload = load_workload(config.model, seed=config.seed)
        self.model = nn.Sequential(*workload.blocks).train()
        self.ddp = DistributedDataParallel(self.model)
        self.loss = workload.loss
        self.optimizer = build_optimizer(config, list(self.model.parameters()))
        self.data = workload.make_data()
        self.sampler = GlobalBatchSampler(len(self.data.train), config.batch_size, world, 0)
        self.rank, self.world = rank, world
        self.meter = SavedActivationMeter()
        self.meter.exclude(list(self.model.parameters()))
        param_bytes = sum(p.numel() * p.element_size() for p in self.model.parameters())
        buffer_bytes = sum(
            b.numel() * b.element_size() for b in self.model.buffers() if b.is_floating_point()
        )
        # Ring all-reduce of every gradient; DDP also broadcasts buffers from rank 0 each
        # forward (flat model: rank 0 sends them to the N-1 others).
        self.bytes_sent = ring_all_reduce_bytes(param_bytes, world)
        self.bytes_sent += (world - 1) * buffer_bytes if rank == 0 else 0
        self.model_state_bytes = 2 * param_bytes  # weights + gradients

    def step(self) -> dict[str, float]:
        start = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        inputs, targets = self.data.train.fetch(self.sampler.next_indices(self.rank))
        with self.meter:
            loss = self.loss(self.ddp(inputs), targets)
        forward_end = time.perf_counter()
        loss.backward()
        backward_end = time.perf_counter()
        self.optimizer.step()
        loss.item()
        end = time.perf_counter()
        # Same CPU accounting as our engine: weights + grads + optimizer state + saved bytes.
        peak = self.model_state_bytes + optimizer_state_bytes(self.optimizer)
        return {
            "forward_time_s": forward_end - start,
            "backward_time_s": backward_end - forward_end,
            "sync_time_s": 0.0,
            "iteration_time_s": end - start,
            "saved_activation_bytes": self.meter.total_bytes,
            "bytes_sent": self.bytes_sent,
            "peak_memory_bytes": peak + self.meter.total_bytes,
        }


def rank_body(rank: int, collectives: Collectives, options: dict[str, Any], out: str) -> None:
    world = collectives.world_size
    base = TrainerConfig(
        model=options["model"],
        plan=model_plan("none", world, options["model"]),
        batch_size=options["batch_size"],
        lr=0.01,
        momentum=0.9,
    )
    spb_plan = model_plan(options["plan"], world, options["model"])
    engines: dict[str, Any] = {
        "ddp": DDPBaseline(base, rank, world),
        "full": SPBTrainer(base, collectives),
        "spb": SPBTrainer(TrainerConfig(**{**base.__dict__, "plan": spb_plan}), collectives),
        "full_uninstrumented": SPBTrainer(
            TrainerConfig(**{**base.__dict__, "measure_activations": False}), collectives
        ),
    }
    records: dict[str, list[dict[str, float]]] = {name: [] for name in ENGINES}
    for iteration in range(options["warmup"] + options["iterations"]):
        shift = iteration % len(ENGINES)
        for name in ENGINES[shift:] + ENGINES[:shift]:
            dist.barrier()  # every engine's iteration starts aligned on all ranks
            start = time.perf_counter()
            result = engines[name].step()
            wall = time.perf_counter() - start
            figures = result if isinstance(result, dict) else result.as_dict()
            if iteration >= options["warmup"]:
                records[name].append({**{f: figures[f] for f in FIGURES}, "wall_s": wall})
    depth = engines["spb"].depth
    torch.save({"depth": depth, "records": records}, Path(out) / f"rank{rank}.pt")


def summarise(ranks: list[dict[str, Any]], engine: str) -> dict[str, Any]:
    per_rank = []
    for rank, data in enumerate(ranks):
        rows = data["records"][engine]
        entry: dict[str, Any] = {"rank": rank}
        if engine == "spb":
            entry["depth"] = data["depth"]
        for figure in FIGURES:
            entry[figure] = statistics.median(row[figure] for row in rows)
        per_rank.append(entry)
    iterations = len(ranks[0]["records"][engine])
    # A synchronous iteration lasts as long as its slowest rank.
    walls = [max(d["records"][engine][i]["wall_s"] for d in ranks) for i in range(iterations)]
    mean = {f: statistics.fmean(r[f] for r in per_rank) for f in FIGURES}
    return {"per_rank": per_rank, "mean": mean, "iteration_wall_time_s": statistics.median(walls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet18_32")
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--plan", default="staircase")
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    add_output_flag(parser)
    args = parser.parse_args()
    options = {
        "model": args.model,
        "batch_size": args.batch_size,
        "plan": args.plan,
        "iterations": args.iterations,
        "warmup": args.warmup,
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        spawn_local(rank_body, args.world, options, out)
        ranks = [torch.load(Path(out) / f"rank{r}.pt") for r in range(args.world)]
    summary = {name: summarise(ranks, name) for name in ENGINES}
    with torch.device("meta"):
        meta = load_workload(args.model)
    costs = profile_workload(meta, load_workload(args.model), batch=2, repeats=0)
    plan = resolve_plan(args.plan, args.world, len(costs))
    limits = plan_cost_ratios(costs, plan)

    def ratio(figure: str, a: str = "spb", b: str = "full") -> float:
        return float(summary[a]["mean"][figure] / summary[b]["mean"][figure])

    ratios = {
        "backward_time": ratio("backward_time_s"),
        "saved_activation_bytes": ratio("saved_activation_bytes"),
        "bytes_sent": ratio("bytes_sent"),
        "full_vs_ddp_iter_time": summary["full"]["iteration_wall_time_s"]
        / summary["ddp"]["iteration_wall_time_s"],
        "spb_vs_full_iter_time": summary["spb"]["iteration_wall_time_s"]
        / summary["full"]["iteration_wall_time_s"],
        "instrumentation_overhead_iter_time": summary["full"]["iteration_wall_time_s"]
        / summary["full_uninstrumented"]["iteration_wall_time_s"]
        - 1.0,
    }
    result = {
        **provenance(),
        "model": args.model,
        "world_size": args.world,
        "batch_size_per_rank": args.batch_size,
        "plan": {"spec": args.plan, "depths": list(plan.depths)},
        "iterations_measured": args.iterations,
        "warmup": args.warmup,
        "wall_s": round(time.perf_counter() - started, 1),
        "statistic": "per-rank median over measured iterations; iteration wall time = median "
        "over iterations of the slowest rank's step",
        **{name: summary[name] for name in ("full", "spb", "ddp", "full_uninstrumented")},
        "ratios": ratios,
        "theoretical_ratios": {
            "backward_time": limits["backward_flops"],
            "saved_activation_bytes": limits["saved_activation_bytes"],
            "bytes_sent": limits["bytes_sent"],
            "note": "from per-block FLOPs (meta-device FlopCounterMode), saved bytes (batch 2) "
            "and parameter bytes under the documented traffic model",
        },
    }
    lines = [
        f"{k}: {v:.3f} (limit {result['theoretical_ratios'].get(k, float('nan')):.3f})"
        if isinstance(v, float)
        else f"{k}: {v}"
        for k, v in ratios.items()
    ]
    emit(result, args.output, lines)


if __name__ == "__main__":
    main()
