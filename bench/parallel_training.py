"""Train one model under data parallelism, a 2BW pipeline and a hybrid plan on N thread ranks
through the gang actor's own seam (worker/runtime/lease_trainer.py), and report per plan: the
per-worker peak memory the engine measured (weights of every live version, gradients,
momentum, saved activations), whether it fits a per-worker limit, seconds per iteration, and
held-out accuracy after --iterations iterations.

Same global batch for every plan: --batch per worker (a pipeline replica of S stages takes
S x --batch in --micro-batches micro-batches). Thread ranks share one process and its cores,
so iteration times compare plans on the same footing but are not gloo-process times
(bench/parallel_plans.py has those, beside the oracle's).

    python -m bench.parallel_training [--model digits_wide_mlp] [-o json]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

import torch

from bench.spb_common import add_output_flag, emit, provenance
from jigsaw.model.numerics import GIB
from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from jigsaw.model.plan import Plan, SPBPlan
from worker.runtime.gang_worker import build_lease_trainer
from worker.runtime.messages import GangConfig
from worker.spb.thread_collectives import run_threads
from worker.zoo import load_workload


def plans(num_blocks: int, workers: int, micro: int) -> dict[str, Plan]:
    return {
        "data": SPBPlan((0,) * workers, num_blocks),
        f"2bw {workers}x1": PipelinePlan.for_workers(num_blocks, workers, 1, micro),
        f"2bw {workers // 2}x2": PipelinePlan.for_workers(num_blocks, workers, 2, micro),
        "hybrid all sharded": HybridPlan.suffix(num_blocks, workers, 1),
    }


def train(args: argparse.Namespace, plan: Plan, root: str) -> dict[str, Any]:
    config = GangConfig(
        job_id="bench",
        attempt=1,
        model=args.model,
        world_size=args.workers,
        plan=plan,
        batch_size=args.batch,
        learning_rate=args.lr,
        seed=args.seed,
        iterations=args.iterations,
        checkpoint_root=root,
        restore_from=None,
        device="cpu",
    )

    def body(rank: int, comm: Any) -> dict[str, Any]:
        trainer = build_lease_trainer(config, comm, "cpu")
        first = trainer.run(1, lambda _: None)
        began = time.perf_counter()
        rest = trainer.run(args.iterations - 1, lambda _: None)
        wall = time.perf_counter() - began
        score = trainer.evaluate(None)
        return {
            "rank": rank,
            "static_bytes": trainer.static_memory_bytes(),
            "peak_bytes": max(first.peak_memory_bytes, rest.peak_memory_bytes),
            "activation_bytes": max(first.saved_activation_bytes, rest.saved_activation_bytes),
            "iteration_s": wall / (args.iterations - 1),
            "bytes_sent_per_iteration": rest.bytes_sent / (args.iterations - 1),
            "losses": list(first.losses + rest.losses),
            "accuracy": score,
        }

    began = time.perf_counter()
    ranks = run_threads(args.workers, body)
    wall = time.perf_counter() - began
    peak = max(r["peak_bytes"] for r in ranks)
    losses = next(r["losses"] for r in reversed(ranks) if r["losses"])
    return {
        "plan": plan.describe(),
        "per_worker_peak_gib": [round(r["peak_bytes"] / GIB, 4) for r in ranks],
        "per_worker_static_gib": [round(r["static_bytes"] / GIB, 4) for r in ranks],
        "max_worker_peak_gib": round(peak / GIB, 4),
        "fits_limit": peak <= args.limit_gib * GIB,
        "iteration_s": round(max(r["iteration_s"] for r in ranks), 4),
        "bytes_sent_per_iteration_mb": round(
            max(r["bytes_sent_per_iteration"] for r in ranks) / 1e6, 2
        ),
        "first_loss": round(losses[0], 4),
        "last_loss": round(losses[-1], 4),
        "accuracy": ranks[0]["accuracy"],
        "wall_s": round(wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="digits_wide_mlp")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32, help="per worker")
    parser.add_argument("--micro-batches", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit-gib", type=float, default=0.25)
    parser.add_argument("--plans", nargs="*", help="subset of plan names (default: all)")
    add_output_flag(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    began = time.perf_counter()
    k = load_workload(args.model).num_blocks
    chosen = plans(k, args.workers, args.micro_batches)
    rows = {}
    with tempfile.TemporaryDirectory() as root:
        for name, plan in chosen.items():
            if args.plans and name not in args.plans:
                continue
            rows[name] = train(args, plan, root)
    result = {
        "provenance": provenance(),
        "model": args.model,
        "workers": args.workers,
        "batch_per_worker": args.batch,
        "iterations": args.iterations,
        "lr": args.lr,
        "limit_gib": args.limit_gib,
        "plans": rows,
        "wall_s": round(time.perf_counter() - began, 1),
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
    }
    lines = [f"{args.model}, {args.workers} thread ranks, {args.iterations} iterations"]
    for name, row in rows.items():
        lines.append(
            f"  {name:20s} peak {row['max_worker_peak_gib']:.3f} GiB fits {row['fits_limit']!s:5s}"
            f" {row['iteration_s']:.3f} s/iter acc {row['accuracy']:.3f} wall {row['wall_s']} s"
        )
    emit(result, args.output, lines)


if __name__ == "__main__":
    main()
