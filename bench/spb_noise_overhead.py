"""What the gradient-noise statistics cost: per-iteration instrumentation and probe iterations.

4 gloo ranks. In the same processes, two trainers with the same model, plan and data take
turns iteration by iteration (order rotating, so machine noise hits both alike): one measures
per-block gradient noise (the default), the other has ``gradient_noise=False``. The ratio of
their median step wall times (``trainer.step()`` on rank 0, which a synchronous iteration
makes the group's time) is the instrumentation's cost; target <= 1.02.

Probes: a third trainer runs the staircase plan with a full-backprop probe every
``--probe-every`` iterations; the probe iterations' median time over its ordinary iterations'
gives the cost of one probe, and ``(ratio - 1) / M`` the amortised cost at one probe every ``M``
iterations (the runtime's default ``M`` is 100). Prints ONE JSON object with ``-o json``.

    python -m bench.spb_noise_overhead -o json [--models digits_cnn gpt_small]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from bench.spb_common import add_output_flag, emit, provenance
from worker.runtime.messages import GangConfig
from worker.spb.collectives import Collectives
from worker.spb.launch import spawn_local
from worker.spb.model_plans import model_plan
from worker.spb.thread_collectives import run_threads
from worker.spb.trainer import SPBTrainer
from worker.spb.trainer_setup import TrainerConfig

WORLD = 4
BATCH = {"digits_cnn": 32, "mlp": 32, "gpt_small": 8, "resnet18_32": 8}
RUNTIME_PROBE_EVERY = GangConfig.__dataclass_fields__["noise_probe_every"].default


def _staircase(model: str) -> TrainerConfig:
    plan = model_plan("staircase", WORLD, model)
    return TrainerConfig(model=model, plan=plan, batch_size=BATCH.get(model, 8), lr=0.01)


def _rank(
    rank: int, collectives: Collectives, model: str, iterations: int, probe_every: int, out: str
) -> None:
    base = _staircase(model)
    engines = {
        "noise_on": SPBTrainer(base, collectives),
        "noise_off": SPBTrainer(
            TrainerConfig(**{**base.__dict__, "gradient_noise": False}), collectives
        ),
        "probing": SPBTrainer(
            TrainerConfig(**{**base.__dict__, "noise_probe_every": probe_every}), collectives
        ),
    }
    names = list(engines)
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    probe_times: list[float] = []
    probe_cpu: list[float] = []
    for step in range(iterations + 2):
        shift = step % len(names)
        for name in names[shift:] + names[:shift]:
            tick, cpu_tick = time.perf_counter(), time.process_time()
            metrics = engines[name].step()
            elapsed = time.perf_counter() - tick
            cpu_used = time.process_time() - cpu_tick
            if step < 2:
                continue  # warm-up
            if name == "probing" and metrics.probe:
                probe_times.append(elapsed)
                probe_cpu.append(cpu_used)
            else:
                times[name].append(elapsed)
                cpu[name].append(cpu_used)
    Path(out, f"rank{rank}.json").write_text(
        json.dumps({"times": times, "cpu": cpu, "probe_times": probe_times, "probe_cpu": probe_cpu})
    )


def thread_cpu_ratio(model: str, iterations: int) -> dict[str, float]:
    """The same A/B with the 4 ranks as threads of this process (in-process backend), timed
    with each rank thread's own CPU clock (``time.thread_time``): it counts only the CPU that
    thread consumed, so other tenants of the machine barely move it."""
    base = _staircase(model)
    off_config = TrainerConfig(**{**base.__dict__, "gradient_noise": False})

    def body(_rank: int, collectives: Collectives) -> dict[str, list[float]]:
        engines = {
            "noise_on": SPBTrainer(base, collectives),
            "noise_off": SPBTrainer(off_config, collectives),
        }
        cpu: dict[str, list[float]] = {"noise_on": [], "noise_off": []}
        for step in range(iterations + 2):
            order = ["noise_on", "noise_off"] if step % 2 else ["noise_off", "noise_on"]
            for name in order:
                tick = time.thread_time()
                engines[name].step()
                if step >= 2:
                    cpu[name].append(time.thread_time() - tick)
        return cpu

    ranks = run_threads(WORLD, body)
    on = sum(statistics.median(r["noise_on"]) for r in ranks)
    off = sum(statistics.median(r["noise_off"]) for r in ranks)
    return {
        "thread_cpu_s_noise_on": on,
        "thread_cpu_s_noise_off": off,
        "instrumentation_ratio_thread_cpu": on / off,
    }


def measure(model: str, iterations: int, probe_every: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        spawn_local(_rank, WORLD, model, iterations, probe_every, tmp)
        ranks = [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(WORLD)]
    data = ranks[0]
    times, probes = data["times"], data["probe_times"]
    median = statistics.median
    # CPU time each rank's process spent in step() (all its threads, gloo's included): far less
    # sensitive to other tenants than wall time; summed over ranks.
    cpu_on = sum(median(r["cpu"]["noise_on"]) for r in ranks)
    cpu_off = sum(median(r["cpu"]["noise_off"]) for r in ranks)
    cpu_ordinary = sum(median(r["cpu"]["probing"]) for r in ranks)
    cpu_probe = sum(median(r["probe_cpu"]) for r in ranks) if probes else None
    on, off = statistics.median(times["noise_on"]), statistics.median(times["noise_off"])
    ordinary = statistics.median(times["probing"])
    probe = statistics.median(probes) if probes else None
    probe_ratio = probe / ordinary if probe else None
    return {
        "model": model,
        "batch_per_rank": BATCH.get(model, 8),
        "measured_iterations": iterations,
        "step_s_noise_off": off,
        "step_s_noise_on": on,
        "instrumentation_ratio": on / off,
        "cpu_s_noise_off": cpu_off,
        "cpu_s_noise_on": cpu_on,
        "instrumentation_ratio_cpu": cpu_on / cpu_off,
        "probe_ratio_cpu": cpu_probe / cpu_ordinary if cpu_probe else None,
        "probe_iterations": len(probes),
        "step_s_probe": probe,
        "step_s_staircase_ordinary": ordinary,
        "probe_ratio": probe_ratio,
        "amortised_probe_cost_at_runtime_default": (probe_ratio - 1) / RUNTIME_PROBE_EVERY
        if probe_ratio
        else None,
        "runtime_probe_every": RUNTIME_PROBE_EVERY,
        **thread_cpu_ratio(model, iterations),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["digits_cnn", "gpt_small"])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--probe-every", type=int, default=4)
    parser.add_argument(
        "--thread-cpu-only",
        action="store_true",
        help="only the in-process A/B timed by thread CPU clocks (no gloo processes, no probes)",
    )
    add_output_flag(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    started = time.perf_counter()
    if args.thread_cpu_only:
        rows = [{"model": m, **thread_cpu_ratio(m, args.iterations)} for m in args.models]
        document = {
            "provenance": {**provenance(), "wall_s": round(time.perf_counter() - started, 1)},
            "plan": "staircase",
            "world_size": WORLD,
            "results": rows,
        }
        emit(
            document,
            args.output,
            [
                f"{r['model']}: thread CPU ratio {r['instrumentation_ratio_thread_cpu']:.4f}"
                for r in rows
            ],
        )
        return
    results = [measure(m, args.iterations, args.probe_every) for m in args.models]
    document = {
        "provenance": {**provenance(), "wall_s": round(time.perf_counter() - started, 1)},
        "plan": "staircase",
        "world_size": WORLD,
        "results": results,
    }
    lines = [
        f"{r['model']}: step {r['step_s_noise_off'] * 1e3:.1f} ms off, "
        f"{r['step_s_noise_on'] * 1e3:.1f} ms on, ratio {r['instrumentation_ratio']:.3f} "
        f"(CPU time ratio {r['instrumentation_ratio_cpu']:.3f}, "
        f"thread CPU {r['instrumentation_ratio_thread_cpu']:.3f}); "
        f"probe {r['probe_ratio']:.2f}x an ordinary staircase step"
        for r in results
    ]
    emit(document, args.output, lines)


if __name__ == "__main__":
    main()
