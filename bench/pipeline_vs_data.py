"""One job, run as data parallelism and as the planner's PipeDream-2BW pipeline, through the
gang's own lease seam (worker/runtime: the engines a Ray gang runs), against single-process
references of the two update rules.

1. ``throughput``: N gloo processes, one intra-op thread each; every engine is warmed up with
   one iteration, then runs --rounds rounds of --iterations iterations in chunks of 25 (as a
   gang runs between control points), engines interleaved per round. samples/s is the lease
   outcome's formula: the samples the ranks report, summed, over the slowest rank's wall
   time. Per engine, where the time went (compute, gradient sync, the rest of the step).
2. ``accuracy``: held-out accuracy after --iterations iterations, per seed, of the data-parallel
   engine, the 2BW engine, and single-process torch.optim.SGD references whose gradient is
   taken at W(t) (data parallelism) or at W(t-1) (the 2BW rule W(t+1) = W(t) - lr grad
   f(W(t-1))), with the job's momentum and with none; and how far the 2BW engine's final
   weights are from the delay-1 reference (the engine is the rule when that is ~1e-6).

    python -m bench.pipeline_vs_data [--part throughput|accuracy|both] [-o json]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from statistics import fmean
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from bench.spb_common import add_output_flag, emit, provenance
from jigsaw.model.domain import JobSpec
from jigsaw.model.plan import Plan, full_backprop
from jigsaw.planning.planner import Planner
from worker.runtime.gang_worker import build_lease_trainer
from worker.runtime.messages import GangConfig
from worker.spb.launch import spawn_local
from worker.spb.sampler import GlobalBatchSampler
from worker.spb.thread_collectives import run_threads
from worker.zoo import load_workload

CONTROL_EVERY = 25
MOMENTUM = 0.9  # what the engines train with (GangConfig has no momentum field)


def job_plans(model: str, workers: int, batch: int) -> dict[str, Plan]:
    """Data parallel (full backprop) and the plan the planner gives ``parallelism: pipeline``."""
    spec = JobSpec(
        name="bench",
        model=model,
        workers=workers,
        batch_size=batch,
        parallelism="pipeline",
        iterations=1,
    )
    choice = Planner().plan_choice(spec)
    assert choice is not None and choice.chosen.plan is not None
    blocks = load_workload(model).num_blocks
    return {"data": full_backprop(workers, blocks), "2bw": choice.chosen.plan}


def gang_config(args: argparse.Namespace, plan: Plan, seed: int, root: str) -> GangConfig:
    return GangConfig(
        job_id="bench",
        attempt=1,
        model=args.model,
        world_size=args.workers,
        plan=plan,
        batch_size=args.batch,
        learning_rate=args.lr,
        seed=seed,
        iterations=10**9,
        checkpoint_root=root,
        restore_from=None,
        device="cpu",
    )


def chunks(start: int, count: int) -> list[int]:
    """Run lengths a gang uses: up to the next multiple of CONTROL_EVERY each time."""
    out, at = [], start
    while at < start + count:
        until = min((at // CONTROL_EVERY + 1) * CONTROL_EVERY, start + count)
        out.append(until - at)
        at = until
    return out


# ----------------------------------------------------------------------------- throughput


def throughput_body(
    rank: int, comm: Any, out_dir: str, configs: dict[str, GangConfig], iterations: int, rounds: int
) -> None:
    trainers = {name: build_lease_trainer(c, comm, "cpu") for name, c in configs.items()}
    for trainer in trainers.values():
        trainer.run(1, lambda _: None)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trainers}
    names = list(trainers)
    for number in range(rounds):
        for name in names[number % len(names) :] + names[: number % len(names)]:
            trainer = trainers[name]
            comm.barrier()
            began = time.perf_counter()
            runs = [trainer.run(n, lambda _: None) for n in chunks(trainer.iteration, iterations)]
            wall = time.perf_counter() - began
            results[name].append(
                {
                    "wall_s": wall,
                    "samples": sum(r.samples for r in runs),
                    "compute_s": sum(r.compute_s for r in runs),
                    "sync_s": sum(r.sync_s for r in runs),
                    "iteration_s": sum(r.iteration_s for r in runs),
                }
            )
    torch.save(results, Path(out_dir) / f"rank{rank}.pt")


def measure_throughput(args: argparse.Namespace, plans: dict[str, Plan]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as out:
        configs = {name: gang_config(args, plan, 0, root) for name, plan in plans.items()}
        spawn_local(throughput_body, args.workers, out, configs, args.iterations, args.rounds)
        ranks = [torch.load(Path(out) / f"rank{r}.pt") for r in range(args.workers)]
    rows: dict[str, Any] = {}
    for name in plans:
        per_round = []
        for k in range(args.rounds):
            measured = [ranks[r][name][k] for r in range(args.workers)]
            wall = max(m["wall_s"] for m in measured)
            per_round.append(
                {
                    "samples": sum(m["samples"] for m in measured),
                    "samples_per_s": sum(m["samples"] for m in measured) / wall,
                    "ms_per_iteration": 1e3 * wall / args.iterations,
                    "per_rank_ms_per_iteration": {
                        phase: [round(1e3 * m[phase] / args.iterations, 3) for m in measured]
                        for phase in ("compute_s", "sync_s", "iteration_s", "wall_s")
                    },
                }
            )
        best = sorted(per_round, key=lambda r: r["samples_per_s"])[len(per_round) // 2]
        rows[name] = {
            "plan": plans[name].describe(),
            "median_samples_per_s": round(best["samples_per_s"], 1),
            "median_ms_per_iteration": round(best["ms_per_iteration"], 3),
            "rounds": per_round,
        }
    for row in rows.values():
        row["vs_data"] = round(
            row["median_samples_per_s"] / rows["data"]["median_samples_per_s"], 3
        )
    return rows


# ------------------------------------------------------------------------------- accuracy


def held_out_accuracy(model: str, seed: int, weights: dict[str, Tensor]) -> float:
    workload = load_workload(model, seed=seed)
    net = nn.Sequential(*workload.blocks)
    net.load_state_dict(weights)
    held = workload.make_data().eval
    assert held is not None
    inputs, targets = held.fetch(torch.arange(len(held)))
    with torch.no_grad():
        return float((net(inputs).argmax(-1) == targets).float().mean())


def reference(
    args: argparse.Namespace, seed: int, delay: int, momentum: float
) -> dict[str, Tensor]:
    """Whole model, one process, the job's global batches in the job's order; the gradient of
    the global batch's mean loss at W(t - delay), applied by torch.optim.SGD to W(t)."""
    workload = load_workload(args.model, seed=seed)
    net = nn.Sequential(*workload.blocks)
    names = [n for n, _ in net.named_parameters()]
    params = list(net.parameters())
    optimizer = torch.optim.SGD(params, lr=args.lr, momentum=momentum)
    data = workload.make_data().train
    sampler = GlobalBatchSampler(len(data), args.batch * args.workers, 1, seed)
    previous = [p.detach().clone() for p in params]
    for _ in range(args.iterations):
        inputs, targets = data.fetch(sampler.next_indices(0))
        at = previous if delay else [p.detach().clone() for p in params]
        leaves = [w.detach().requires_grad_(True) for w in at]
        out = functional_call(net, dict(zip(names, leaves, strict=True)), (inputs,))
        grads = torch.autograd.grad(workload.loss(out, targets), leaves)
        previous = [p.detach().clone() for p in params]
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        optimizer.step()
    return {n: p.detach().clone() for n, p in zip(names, params, strict=True)}


def engine_weights(args: argparse.Namespace, plan: Plan, seed: int) -> dict[str, Tensor]:
    with tempfile.TemporaryDirectory() as root:
        config = gang_config(args, plan, seed, root)

        def body(_rank: int, comm: Any) -> dict[str, Tensor]:
            trainer = build_lease_trainer(config, comm, "cpu")
            trainer.run(1, lambda _: None)
            for n in chunks(1, args.iterations - 1):
                trainer.run(n, lambda _: None)
            engine: Any = trainer.trainer  # type: ignore[attr-defined]
            if trainer.kind == "spb":
                net = nn.Sequential(*engine.blocks)
                return {n: t.detach().clone() for n, t in net.state_dict().items()}
            return engine.named_weights() if engine.replica == 0 else {}

        merged: dict[str, Tensor] = {}
        for part in run_threads(args.workers, body):
            merged.update(part)
        return merged


def max_difference(a: dict[str, Tensor], b: dict[str, Tensor]) -> float:
    return max((a[n] - b[n]).abs().max().item() for n in b)


def measure_accuracy(args: argparse.Namespace, plans: dict[str, Plan]) -> dict[str, Any]:
    rows: dict[str, list[float]] = {}
    distance: list[float] = []
    for seed in args.seeds:
        weights = {
            "data engine": engine_weights(args, plans["data"], seed),
            "2bw engine": engine_weights(args, plans["2bw"], seed),
        }
        for momentum in (MOMENTUM, 0.0):
            for delay in (0, 1):
                name = f"reference delay {delay}, momentum {momentum}"
                weights[name] = reference(args, seed, delay, momentum)
        distance.append(
            max_difference(
                weights["2bw engine"], weights[f"reference delay 1, momentum {MOMENTUM}"]
            )
        )
        for name, w in weights.items():
            rows.setdefault(name, []).append(round(held_out_accuracy(args.model, seed, w), 4))
    return {
        "per_seed": rows,
        "mean": {name: round(fmean(values), 4) for name, values in rows.items()},
        "max_abs_2bw_engine_minus_delay1_reference": distance,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("throughput", "accuracy", "both"), default="both")
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32, help="per worker (the job's batch_size)")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds (median)")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    add_output_flag(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    began = time.perf_counter()
    load_before = os.getloadavg()[0]
    plans = job_plans(args.model, args.workers, args.batch)
    result: dict[str, Any] = {
        "provenance": provenance(),
        "model": args.model,
        "workers": args.workers,
        "batch_per_worker": args.batch,
        "lr": args.lr,
        "momentum": MOMENTUM,
        "iterations": args.iterations,
        "plans": {name: plan.describe() for name, plan in plans.items()},
    }
    lines = [f"{args.model}, {args.workers} workers x {args.batch}, lr {args.lr}"]
    if args.part in ("throughput", "both"):
        result["throughput"] = measure_throughput(args, plans)
        for name, row in result["throughput"].items():
            lines.append(
                f"  {name:5s} {row['median_samples_per_s']:9.1f} samples/s "
                f"{row['median_ms_per_iteration']:7.2f} ms/it x{row['vs_data']} vs data"
            )
    if args.part in ("accuracy", "both"):
        result["accuracy"] = measure_accuracy(args, plans)
        for name, mean in result["accuracy"]["mean"].items():
            per_seed = result["accuracy"]["per_seed"][name]
            lines.append(f"  {name:36s} held-out accuracy {mean:.3f} {per_seed}")
        worst = max(result["accuracy"]["max_abs_2bw_engine_minus_delay1_reference"])
        lines.append(f"  max |2bw engine - delay-1 reference| = {worst:.2e}")
    result["wall_s"] = round(time.perf_counter() - began, 1)
    result["load_average_1min"] = {"before": load_before, "after": os.getloadavg()[0]}
    lines.append(f"wall {result['wall_s']} s")
    emit(result, args.output, lines)


if __name__ == "__main__":
    main()
