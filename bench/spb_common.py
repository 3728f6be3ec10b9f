"""Shared bits of the SPB benchmarks: provenance, output, plan cost limits from a profile, and
the loss-curve arithmetic of the efficiency benchmarks (spb_efficiency, batch_efficiency)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
from collections.abc import Callable, Sequence
from typing import Any

import torch

from bench import command_line
from jigsaw.model.block_noise import BlockNoise
from jigsaw.model.plan import SPBPlan
from worker.spb.block_costs import BlockCost
from worker.spb.collectives import ring_all_reduce_bytes


def provenance() -> dict[str, Any]:
    return {
        "command": command_line(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "torch_version": torch.__version__,
        "machine": f"{platform.machine()} {platform.processor() or ''} "
        f"{os.cpu_count()} CPU cores visible (shared), {platform.system()}".replace("  ", " "),
    }


def add_output_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("json", "text"), default="text")


def emit(result: dict[str, Any], output: str, text_lines: Sequence[str]) -> None:
    if output == "json":
        print(json.dumps(result, indent=2))
    else:
        print("\n".join(text_lines))


def plan_cost_ratios(costs: list[BlockCost], plan: SPBPlan) -> dict[str, float]:
    """SPB / full-backprop ratios implied by per-block costs, summed over ranks.

    Backward: a rank with depth d pays blocks d+1..K, without the input gradient of block d+1.
    Activations: the saved bytes of the blocks it trains. Bytes: the documented traffic model
    (ring all-reduce among contributors + flat delivery from the root).
    """
    n, k = plan.num_workers, plan.num_blocks
    full_backward = sum(c.backward_flops_per_sample for c in costs)
    spb_backward = 0.0
    for depth in plan.depths:
        trained = costs[depth:]
        spb_backward += sum(c.backward_flops_per_sample for c in trained)
        spb_backward -= trained[0].backward_input_flops_per_sample
    full_act = sum(c.activation_bytes_per_sample for c in costs)
    spb_act = sum(sum(c.activation_bytes_per_sample for c in costs[d:]) for d in plan.depths)
    full_bytes = n * sum(ring_all_reduce_bytes(c.param_bytes, n) for c in costs)
    spb_bytes = 0.0
    for block in range(1, k + 1):
        size = costs[block - 1].param_bytes
        contributors = len(plan.contributors(block))
        spb_bytes += contributors * ring_all_reduce_bytes(size, contributors)
        spb_bytes += (n - contributors) * size
    return {
        "backward_flops": spb_backward / (n * full_backward),
        "saved_activation_bytes": spb_act / (n * full_act),
        "bytes_sent": spb_bytes / full_bytes,
    }


def iterations_to(curve: list[list[float]], target: float) -> float:
    """First (interpolated) iteration at which the loss curve is <= ``target``; inf if never."""
    previous = curve[0]
    for point in curve:
        if point[1] <= target:
            if point is curve[0] or previous[1] <= target or point[1] == previous[1]:
                return float(point[0])
            i0, v0 = previous
            i1, v1 = point
            return i0 + (target - v0) / (v1 - v0) * (i1 - i0)
        previous = point
    return float("inf")


def harmonic_mean_along(
    stats: list[list[Any]], until: float, rate: Callable[[tuple[BlockNoise, ...]], float]
) -> float | None:
    """Harmonic mean of ``rate(statistics at t)`` over iterations [0, until), from the newest
    statistics at or before t (the first statistics cover the iterations before them)."""
    points = [
        (int(it), tuple(BlockNoise(**s) for s in entries)) for it, entries in stats if entries
    ]
    if not points or until <= 0:
        return None
    inverse_sum, covered = 0.0, 0.0
    for index, (iteration, noise) in enumerate(points):
        start = 0.0 if index == 0 else float(iteration)
        end = float(points[index + 1][0]) if index + 1 < len(points) else float("inf")
        span = max(0.0, min(end, until) - start)
        if span <= 0:
            continue
        inverse_sum += span / rate(noise)
        covered += span
    return covered / inverse_sum if inverse_sum > 0 else None
