"""Rank bodies and helpers of bench/parallel_plans.py (importable by spawned processes)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from worker.hybrid import HybridConfig, HybridTrainer
from worker.parallel_profile import measured_block_profile
from worker.pipeline import PipelineConfig, PipelineTrainer
from worker.spb.collectives import Collectives


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str
    """"data", "pipeline" or "hybrid" (data runs on the pipeline engine, one stage)."""
    plan: PipelinePlan | HybridPlan
    batch_size: int


def data_parallel_plan(num_blocks: int, workers: int) -> PipelinePlan:
    """Plain data parallelism on the pipeline engine: one stage, one micro-batch, flush."""
    return PipelinePlan(num_blocks, ((1, num_blocks),), 1, replicas=workers, schedule="gpipe")


class Runner:
    """One scenario's trainer on one rank; ``lease`` times ``iterations`` iterations."""

    def __init__(self, rank: int, comm: Collectives, model: str, scenario: Scenario) -> None:
        self.rank, self.comm, self.scenario = rank, comm, scenario
        batch, lr, momentum = scenario.batch_size, 0.01, 0.9
        plan = scenario.plan
        self.hybrid: HybridTrainer | None = None
        self.pipeline: PipelineTrainer | None = None
        if isinstance(plan, HybridPlan):
            config = HybridConfig(
                model=model, plan=plan, batch_size=batch, lr=lr, momentum=momentum
            )
            self.hybrid = HybridTrainer(config, comm)
            self.samples = scenario.batch_size * plan.num_workers
        else:
            pipeline = PipelineConfig(
                model=model, plan=plan, batch_size=batch, lr=lr, momentum=momentum
            )
            self.pipeline = PipelineTrainer(pipeline, comm)
            self.samples = scenario.batch_size * plan.replicas

    def lease(self, iterations: int) -> dict[str, Any]:
        self.comm.barrier()
        if self.hybrid is not None:
            began = time.perf_counter()
            steps = [self.hybrid.step() for _ in range(iterations)]
            wall = time.perf_counter() - began
            last = steps[-1]
            return {
                "rank": self.rank,
                "wall_s": wall,
                "iteration_s": wall / iterations,
                "params": last.param_bytes,
                "gradients": last.gradient_bytes,
                "optimizer": last.optimizer_bytes,
                "activations": max(s.activation_bytes for s in steps),
                "bytes_sent_per_iteration": last.bytes_sent,
                "samples_per_iteration": self.samples,
            }
        assert self.pipeline is not None
        run = self.pipeline.train(iterations)
        return {
            "rank": self.rank,
            "stage": run.stage,
            "wall_s": run.wall_s,
            "iteration_s": run.wall_s / iterations,
            "params": run.param_bytes,
            "weight_versions": run.weight_versions,
            "gradients": run.gradient_bytes,
            "optimizer": run.optimizer_bytes,
            "activations": run.activation_bytes,
            "bytes_sent_per_iteration": run.bytes_sent // iterations,
            "samples_per_iteration": self.samples,
        }


def run_scenario(
    rank: int, comm: Collectives, model: str, scenario: Scenario, iterations: int, warmup: int
) -> dict[str, Any]:
    runner = Runner(rank, comm, model, scenario)
    if warmup:
        runner.lease(warmup)
    return runner.lease(iterations)


def measure_network(comm: Collectives) -> dict[str, float]:
    """All-reduce of 4 bytes and of 8 MB among all ranks: latency and bandwidth of the
    ring model t = 2(n-1) alpha + 2(n-1)/n S / beta."""
    ranks = tuple(range(comm.world_size))
    n = comm.world_size

    def timed(numel: int, repeats: int) -> float:
        tensor = torch.zeros(numel)
        comm.all_reduce_sum(tensor, ranks).wait()
        best = float("inf")
        for _ in range(repeats):
            comm.barrier()
            began = time.perf_counter()
            comm.all_reduce_sum(tensor, ranks).wait()
            best = min(best, time.perf_counter() - began)
        return best

    small = timed(1, 20)
    big_numel = 2 * 2**20
    big = timed(big_numel, 5)
    latency = small / (2 * (n - 1))
    moved = 2 * (n - 1) / n * big_numel * 4
    return {"latency_s": latency, "bandwidth_Bps": moved / max(big - small, 1e-9)}


def gloo_body(
    rank: int,
    comm: Collectives,
    out_dir: str,
    model: str,
    scenarios: list[Scenario],
    iterations: int,
    repeats: int,
) -> None:
    """Every scenario's trainer is built once and warmed up; then ``repeats`` rounds each
    profile the model (every rank at once: the same contention as the runs) and time one
    lease of every scenario, in an order rotated per round, so slow phases of a shared
    machine hit every plan type alike."""
    torch.manual_seed(0)
    network = measure_network(comm)
    runners = [Runner(rank, comm, model, s) for s in scenarios]
    for runner in runners:
        runner.lease(1)
    profiles = []
    results: dict[str, list[dict[str, Any]]] = {s.name: [] for s in scenarios}
    for round_number in range(repeats):
        comm.barrier()
        profiles.append(measured_block_profile(model, batch=scenarios[0].batch_size, repeats=2))
        shift = round_number % len(runners)
        for runner in runners[shift:] + runners[:shift]:
            results[runner.scenario.name].append(runner.lease(iterations))
    saved = {"network": network, "profiles": profiles, "results": results}
    torch.save(saved, Path(out_dir) / f"rank{rank}.pt")
