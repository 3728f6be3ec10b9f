"""Profile every zoo model block by block; write jigsaw/data/profiles/<name>.json.

The scheduler's oracle reads these files. FLOPs come from FlopCounterMode on the meta device;
saved-activation bytes and per-sample times are measured on this machine's CPU (see
worker/spb/block_costs.py for exactly what is counted). Times are ``null`` for models whose
measurement would exceed ``--max-gflops`` per timed pass.

    python -m bench.profile_models [--models resnet18_32 ...] [-o json]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from bench.spb_common import add_output_flag, emit, provenance
from worker.spb.block_costs import count_flops, profile_workload
from worker.zoo import list_models, load_workload

OUT_DIR = Path("jigsaw/data/profiles")


def batch_for(input_shape: tuple[int, ...]) -> int:
    # Big images: two samples are enough to divide out per-sample bytes and keep it quick.
    return 2 if len(input_shape) == 3 and input_shape[-1] >= 224 else 8


def profile(name: str, max_gflops: float, repeats: int) -> dict[str, Any]:
    torch.manual_seed(0)
    with torch.device("meta"):
        meta = load_workload(name)
    cpu = load_workload(name)
    batch = batch_for(meta.input_shape)
    forward_flops = sum(_forward_flops(meta))
    timed = forward_flops * 3 * batch / 1e9 <= max_gflops
    costs = profile_workload(meta, cpu, batch=batch, repeats=repeats if timed else 0)
    info = provenance()
    return {
        "model": name,
        "num_blocks": meta.num_blocks,
        "input_shape": list(meta.input_shape),
        "train_samples": len(cpu.make_data().train),
        "profiled_batch_size": batch,
        "device": f"cpu ({platform.machine()}, {torch.get_num_threads()} intra-op threads, "
        "shared machine)",
        "torch_version": torch.__version__,
        "created": info["date"],
        "command": info["command"],
        "description": meta.description,
        "notes": (
            "FLOPs per sample from torch.utils.flop_counter.FlopCounterMode on the meta device "
            "(2 FLOPs per multiply-add; matmul/conv/attention only). backward_flops_per_sample "
            "= weight-grad + input-grad FLOPs for blocks 2..K and weight-grad only for block 1 "
            "(its input is data); a partial worker's first trained block d+1 also skips its "
            "input-grad: subtract backward_input_flops_per_sample for it. "
            "activation_bytes_per_sample = distinct saved-tensor storage bytes (parameters "
            "excluded) with the block's input requiring grad, measured on CPU at "
            f"batch {batch}. Times: best of {repeats} timed passes after one warm-up on this "
            "CPU, or null when a pass would exceed the profiler's FLOP budget."
        ),
        "blocks": [cost.as_dict() for cost in costs],
    }


def _forward_flops(meta: Any) -> list[float]:
    return [forward for forward, _, _ in count_flops(meta)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=list_models())
    parser.add_argument("--max-gflops", type=float, default=200.0)
    parser.add_argument("--repeats", type=int, default=2)
    add_output_flag(parser)
    args = parser.parse_args()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    written = {}
    for name in args.models:
        started = time.perf_counter()
        document = profile(name, args.max_gflops, args.repeats)
        path = OUT_DIR / f"{name}.json"
        path.write_text(json.dumps(document, indent=2) + "\n")
        written[name] = {"path": str(path), "seconds": round(time.perf_counter() - started, 1)}
    emit({"written": written}, args.output, [f"{k}: {v}" for k, v in written.items()])


if __name__ == "__main__":
    main()
