"""Data parallel vs PipeDream-2BW vs GPipe-style flush vs SplitBrain-style hybrid, side by side,
with the oracle's prediction next to every measurement.

1. Memory, N = --memory-workers ranks as threads of one process (memory accounting does not
   depend on processes): per-worker weights (all live versions), gradients, momentum,
   peak saved activations, and bytes sent per iteration.
2. Time, N = --timing-workers gloo processes, one intra-op thread each: a warm-up lease,
   then --iterations iterations timed as one lease; the network's latency and bandwidth are
   measured first (all-reduce of 4 B and 8 MB) and become the oracle's hardware spec, with
   per-block compute times profiled now at one thread (worker/parallel_profile.py).

The global batch is the same for every plan type: --batch per data-parallel worker, so a
pipeline replica of S stages takes S x --batch samples in --micro-batches micro-batches.

    python -m bench.parallel_plans [--model vgg16_32_fc] [-o json]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import torch

from bench.parallel_common import Scenario, data_parallel_plan, gloo_body, run_scenario
from bench.spb_common import add_output_flag, emit, provenance
from jigsaw.model.hardware import preset, with_overrides
from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from jigsaw.model.profiles import ModelProfile
from jigsaw.oracle.parallel_profile import ParallelProfile
from jigsaw.oracle.plan_partitions import partition_pipeline
from jigsaw.oracle.plan_predictions import PlanPrediction, predict_plan
from worker.parallel_profile import measured_block_profile, parallel_profile
from worker.spb.launch import spawn_local
from worker.spb.thread_collectives import run_threads

MB = 1e6


def scenarios(
    profile: ParallelProfile, workers: int, batch: int, micro: int, stages: int, limit: int
) -> list[Scenario]:
    """The pipeline split is the planner's (partition_pipeline): the fastest predicted 2BW
    split whose workers fit ``limit``, else the fastest split; GPipe uses the same split."""
    k = profile.blocks.num_blocks
    replicas = workers // stages
    pipe_batch = batch * stages
    hardware = with_overrides(preset("cpu"), gpus_per_node=workers, workspace_bytes=0)
    plan = partition_pipeline(profile, hardware, stages, replicas, micro, pipe_batch, limit)
    if plan is None:
        plan = partition_pipeline(profile, hardware, stages, replicas, micro, pipe_batch)
    assert plan is not None
    gpipe = PipelinePlan(k, plan.stages, micro, replicas, "gpipe")
    return [
        Scenario("data", "data", data_parallel_plan(k, workers), batch),
        Scenario("2bw", "pipeline", plan, pipe_batch),
        Scenario("gpipe", "pipeline", gpipe, pipe_batch),
        Scenario("hybrid", "hybrid", HybridPlan.suffix(k, workers, k, "column"), batch),
    ]


def predict(
    scenario: Scenario, profile: ParallelProfile, hardware: Any, lease: int | None
) -> PlanPrediction:
    plan: int | PipelinePlan | HybridPlan = scenario.plan
    if scenario.kind == "data":
        assert isinstance(scenario.plan, PipelinePlan)
        plan = scenario.plan.replicas
    return predict_plan(profile, hardware, plan, scenario.batch_size, lease)


def model_bytes(row: dict[str, Any]) -> int:
    return int(row["params"] + row["gradients"] + row["optimizer"] + row["activations"])


def error(predicted: float, measured: float) -> float:
    return round((predicted - measured) / measured, 3) if measured else float("nan")


def memory_rows(
    model: str,
    profile: ParallelProfile,
    workers: int,
    batch: int,
    micro: int,
    stages: int,
    limit: int,
) -> list[dict[str, Any]]:
    rows = []
    hardware = with_overrides(preset("cpu"), gpus_per_node=workers)
    for scenario in scenarios(profile, workers, batch, micro, stages, limit):
        ranks = run_threads(
            workers, partial(run_scenario, model=model, scenario=scenario, iterations=1, warmup=0)
        )
        prediction = predict(scenario, profile, hardware, None)
        per_rank = []
        for row in ranks:
            want = prediction.per_worker_memory[row["rank"]]
            per_rank.append(
                {
                    "rank": row["rank"],
                    "measured_mb": {
                        k: round(row[k] / MB, 1)
                        for k in ("params", "gradients", "optimizer", "activations")
                    },
                    "measured_total_mb": round(model_bytes(row) / MB, 1),
                    "predicted_total_mb": round(want.model_bytes / MB, 1),
                    "memory_error": error(want.model_bytes, model_bytes(row)),
                    "bytes_sent_per_iteration": row["bytes_sent_per_iteration"],
                    "predicted_bytes_sent": prediction.per_worker_bytes_sent[row["rank"]],
                }
            )
        rows.append(
            {
                "plan": scenario.name,
                "describe": scenario.plan.describe(),
                "max_worker_total_mb": max(r["measured_total_mb"] for r in per_rank),
                "fits_limit": max(model_bytes(r) for r in ranks) <= limit,
                "oracle_says_fits": prediction.fits(limit),
                "max_worker_params_plus_optimizer_mb": max(
                    r["measured_mb"]["params"] + r["measured_mb"]["optimizer"] for r in per_rank
                ),
                "ranks": per_rank,
            }
        )
    return rows


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def median_profile(profiles: list[ModelProfile]) -> ModelProfile:
    """Per block, the median of the rounds' forward and backward times."""
    blocks = []
    for i, block in enumerate(profiles[0].blocks):
        forward = median([p.blocks[i].forward_time_s_per_sample or 0.0 for p in profiles])
        backward = median([p.blocks[i].backward_time_s_per_sample or 0.0 for p in profiles])
        blocks.append(
            replace(block, forward_time_s_per_sample=forward, backward_time_s_per_sample=backward)
        )
    return replace(profiles[0], blocks=tuple(blocks))


def timing_rows(
    model: str,
    profile: ParallelProfile,
    workers: int,
    batch: int,
    micro: int,
    stages: int,
    iterations: int,
    limit: int,
    repeats: int,
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    chosen = scenarios(profile, workers, batch, micro, stages, limit)
    with tempfile.TemporaryDirectory() as out:
        spawn_local(gloo_body, workers, out, model, chosen, iterations, repeats)
        saved = [torch.load(Path(out) / f"rank{r}.pt", weights_only=False) for r in range(workers)]
    network = saved[0]["network"]
    # Compute times: the median over rounds of what rank 0 profiled while every rank did.
    profile = parallel_profile(model, median_profile(saved[0]["profiles"]))
    hardware = with_overrides(
        preset("cpu"),
        gpus_per_node=workers,
        intra_node_bandwidth=network["bandwidth_Bps"],
        intra_node_latency_s=network["latency_s"],
        iteration_overhead_s=0.0,
    )
    rows = []
    for scenario in chosen:
        rounds = [
            max(s["results"][scenario.name][k]["iteration_s"] for s in saved)
            for k in range(repeats)
        ]
        ranks = [s["results"][scenario.name][-1] for s in saved]
        measured = median(rounds)
        prediction = predict(scenario, profile, hardware, iterations)
        samples = ranks[0]["samples_per_iteration"]
        rows.append(
            {
                "plan": scenario.name,
                "describe": scenario.plan.describe(),
                "measured_iteration_s": round(measured, 4),
                "measured_iteration_s_per_round": [round(r, 3) for r in rounds],
                "predicted_iteration_s": round(prediction.iteration_time_s, 4),
                "iteration_time_error": error(prediction.iteration_time_s, measured),
                "measured_samples_per_s": round(samples / measured, 2),
                "max_worker_total_mb": round(max(model_bytes(r) for r in ranks) / MB, 1),
                "memory_error_worst_rank": max(
                    (
                        error(prediction.per_worker_memory[i].model_bytes, model_bytes(r))
                        for i, r in enumerate(ranks)
                    ),
                    key=abs,
                ),
                "bytes_sent_per_iteration": [r["bytes_sent_per_iteration"] for r in ranks],
                "predicted_bytes_sent": list(prediction.per_worker_bytes_sent),
            }
        )
    data = next(r for r in rows if r["plan"] == "data")
    for row in rows:
        row["throughput_vs_data"] = round(
            row["measured_samples_per_s"] / data["measured_samples_per_s"], 3
        )
    return network, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="vgg16_32_fc")
    parser.add_argument("--batch", type=int, default=8, help="per data-parallel worker")
    parser.add_argument("--micro-batches", type=int, default=4)
    parser.add_argument("--stages", type=int, default=2)
    parser.add_argument("--memory-workers", type=int, default=4)
    parser.add_argument("--timing-workers", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=3, help="per timed lease")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (median)")
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument(
        "--memory-limit-mb",
        type=float,
        default=384.0,
        help="per-worker limit on weights+gradients+optimizer+activations (MB = 1e6 B)",
    )
    add_output_flag(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    began = time.perf_counter()
    limit = round(args.memory_limit_mb * MB)
    load_before = os.getloadavg()
    blocks = measured_block_profile(args.model, batch=args.batch, repeats=2)
    profile = parallel_profile(args.model, blocks)
    memory = memory_rows(
        args.model, profile, args.memory_workers, args.batch, args.micro_batches, args.stages, limit
    )
    result: dict[str, Any] = {
        "provenance": provenance(),
        "model": args.model,
        "batch_per_data_parallel_worker": args.batch,
        "per_worker_memory_limit_mb": args.memory_limit_mb,
        "memory": {"workers": args.memory_workers, "plans": memory},
    }
    data_mb = next(r for r in memory if r["plan"] == "data")["max_worker_params_plus_optimizer_mb"]
    for row in memory:
        row["params_plus_optimizer_saved_vs_data"] = round(
            1 - row["max_worker_params_plus_optimizer_mb"] / data_mb, 3
        )
    if not args.skip_timing:
        network, timing = timing_rows(
            args.model,
            profile,
            args.timing_workers,
            args.batch,
            args.micro_batches,
            args.stages,
            args.iterations,
            limit,
            args.repeats,
        )
        result["timing"] = {
            "workers": args.timing_workers,
            "iterations": args.iterations,
            "repeats": args.repeats,
            "network": network,
            "plans": timing,
        }
    result["wall_s"] = round(time.perf_counter() - began, 1)
    result["load_average_1min"] = {"before": load_before[0], "after": os.getloadavg()[0]}
    lines = [f"{args.model}: memory with {args.memory_workers} workers (MB, worst worker)"]
    for row in memory:
        worst = max(row["ranks"], key=lambda r: r["measured_total_mb"])
        lines.append(
            f"  {row['plan']:7s} total {worst['measured_total_mb']:8.1f} "
            f"(oracle {worst['predicted_total_mb']:8.1f}) params+opt "
            f"{row['max_worker_params_plus_optimizer_mb']:7.1f} saved "
            f"{row['params_plus_optimizer_saved_vs_data']:+.0%} sent/iter "
            f"{worst['bytes_sent_per_iteration'] / MB:7.1f} MB fits {row['fits_limit']}"
        )
    for row in result.get("timing", {}).get("plans", []):
        lines.append(
            f"  {row['plan']:7s} {row['measured_iteration_s']:.3f} s/iter (oracle "
            f"{row['predicted_iteration_s']:.3f}, {row['iteration_time_error']:+.0%}) "
            f"{row['measured_samples_per_s']:.1f} samples/s x{row['throughput_vs_data']} "
            f"vs data"
        )
    lines.append(f"wall {result['wall_s']} s")
    emit(result, args.output, lines)


if __name__ == "__main__":
    main()
