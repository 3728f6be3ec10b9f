"""Measure real pair rates of zoo models sharing one device: the data the co-location model
lacks for SPB partial workers with a guest.

For each pair ``A+B`` (``--pairs resnet18_32:2:40+digits_cnn:0,...``: model, SPB stop depth
(0 = full backprop, d = a partial worker that trains blocks d.. only, as an SPB rank does)
and, optionally, milliseconds the job then waits idle each iteration, as a partial worker
waits for its rank 0's backward and the all-reduce: the slack a guest may fill),
every job first trains alone on the device for ``--seconds``, then the two train at the same
time as two processes on the same device, in each sharing mode the device offers:

- ``timeslice``: two processes, two contexts: on a GPU the driver time-slices them; on a CPU
  the OS schedules them (each process gets ``--threads`` threads);
- ``mps``: on a CUDA device with ``nvidia-cuda-mps-control`` on the PATH, the same two
  processes under an MPS daemon this script starts (private pipe and log directories) and
  stops; reported as unavailable elsewhere.

A job's rate is iterations per second over the measured window after ``--warmup``
iterations (both processes start the window together, at a barrier). The fraction is the
shared rate over the solo rate. Without an idle time a partial worker runs back to back, so
its fraction is then a lower bound on what it keeps in a gang. Prints one JSON object with
the device, torch version and the settings; runs on CPU (two processes on the CPU) as well
as on a GPU.

    python -m bench.colocation_measure --pairs resnet18_32:2:20+resnet18_32:0
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from worker.zoo.registry import load_workload


@dataclass(frozen=True)
class JobArgs:
    model: str
    depth: int
    batch: int
    idle_ms: float = 0.0


def parse_job(text: str, batch: int) -> JobArgs:
    model, _, rest = text.partition(":")
    depth, _, idle = rest.partition(":")
    if not model:
        raise SystemExit(f"--pairs: empty model in {text!r}")
    try:
        stop = int(depth) if depth else 0
        wait = float(idle) if idle else 0.0
    except ValueError:
        raise SystemExit(
            f"--pairs: in {text!r} the depth must be an integer and the idle time a number"
        ) from None
    if stop < 0 or not 0.0 <= wait < 60_000.0:
        raise SystemExit(f"--pairs: in {text!r} depth must be >= 0 and idle 0..60000 ms")
    return JobArgs(model, stop, batch, wait)


def parse_pairs(text: str, batch: int) -> list[tuple[JobArgs, JobArgs]]:
    pairs = []
    for item in text.split(","):
        left, plus, right = item.strip().partition("+")
        if not plus:
            raise SystemExit(f"--pairs: expected MODEL[:DEPTH]+MODEL[:DEPTH], got {item!r}")
        pairs.append((parse_job(left, batch), parse_job(right, batch)))
    return pairs


def train(
    job: JobArgs,
    device: str,
    threads: int,
    warmup: int,
    seconds: float,
    barrier: Any,
    results: Any,
    slot: int,
) -> None:
    """One training process: warm up, meet the other at the barrier, count iterations."""
    torch.set_num_threads(threads)
    workload = load_workload(job.model)
    if not 0 <= job.depth < workload.num_blocks:
        results.put((slot, {"error": f"depth {job.depth} outside 0..{workload.num_blocks - 1}"}))
        barrier.abort()
        return
    target = torch.device(device)
    for block in workload.blocks:
        block.to(target)
    data = workload.make_data().train
    inputs, targets = data.fetch(torch.arange(job.batch) % len(data))
    inputs, targets = inputs.to(target), targets.to(target)
    trained = [p for block in workload.blocks[job.depth :] for p in block.parameters()]
    optimizer = torch.optim.SGD(trained, lr=0.01, momentum=0.9)

    def sync() -> None:
        if target.type == "cuda":
            torch.cuda.synchronize(target)

    def step() -> None:
        hidden = inputs
        with torch.no_grad():
            for block in workload.blocks[: job.depth]:
                hidden = block(hidden)
        for block in workload.blocks[job.depth :]:
            hidden = block(hidden)
        loss = workload.loss(hidden, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if job.idle_ms > 0:
            sync()  # the wait starts when this worker's compute has ended
            time.sleep(job.idle_ms / 1000.0)

    for _ in range(warmup):
        step()
    sync()
    barrier.wait()
    started = time.perf_counter()
    done = 0
    while time.perf_counter() - started < seconds:
        step()
        done += 1
    sync()
    elapsed = time.perf_counter() - started
    results.put((slot, {"iterations": done, "seconds": elapsed, "rate": done / elapsed}))


def run_together(jobs: Sequence[JobArgs], args: argparse.Namespace) -> list[dict[str, Any]]:
    context = mp.get_context("spawn")
    barrier = context.Barrier(len(jobs))
    results = context.Queue()
    processes = [
        context.Process(
            target=train,
            args=(job, args.device, args.threads, args.warmup, args.seconds, barrier, results, i),
        )
        for i, job in enumerate(jobs)
    ]
    for process in processes:
        process.start()
    found: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + args.seconds + args.timeout
    while len(found) < len(jobs) and time.monotonic() < deadline:
        try:
            slot, result = results.get(timeout=1.0)
        except Exception:  # queue.Empty: keep waiting until the deadline
            continue
        found[slot] = result
    for process in processes:
        process.join(timeout=5.0)
        if process.is_alive():
            process.terminate()
    return [found.get(i, {"error": "no result (crashed or timed out)"}) for i in range(len(jobs))]


@contextmanager
def mps_daemon() -> Iterator[None]:
    """An MPS control daemon with private pipe/log directories, stopped on exit."""
    with tempfile.TemporaryDirectory(prefix="jigsaw-mps-") as root:
        env = {
            **os.environ,
            "CUDA_MPS_PIPE_DIRECTORY": str(Path(root) / "pipe"),
            "CUDA_MPS_LOG_DIRECTORY": str(Path(root) / "log"),
        }
        for key in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"):
            Path(env[key]).mkdir()
        subprocess.run(["nvidia-cuda-mps-control", "-d"], env=env, check=True)
        saved = {
            k: os.environ.get(k) for k in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY")
        }
        os.environ.update({k: env[k] for k in saved})
        try:
            yield
        finally:
            subprocess.run(["nvidia-cuda-mps-control"], input="quit\n", text=True, env=env)
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def modes_offered(device: str) -> dict[str, str | None]:
    """Sharing modes and why one is not offered (None: offered)."""
    mps_missing = None
    if not device.startswith("cuda"):
        mps_missing = "not a CUDA device"
    elif shutil.which("nvidia-cuda-mps-control") is None:
        mps_missing = "nvidia-cuda-mps-control is not on the PATH"
    return {"timeslice": None, "mps": mps_missing}


def fractions(
    solo: Sequence[dict[str, Any]], shared: Sequence[dict[str, Any]]
) -> list[float | None]:
    out: list[float | None] = []
    for alone, together in zip(solo, shared, strict=True):
        if "rate" in alone and "rate" in together and alone["rate"] > 0:
            out.append(round(together["rate"] / alone["rate"], 4))
        else:
            out.append(None)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pairs",
        default="digits_cnn:0+digits_cnn:0,digits_cnn:2:10+digits_cnn:0",
        help="MODEL[:DEPTH[:IDLE_MS]]+MODEL[:DEPTH[:IDLE_MS]], comma-separated",
    )
    parser.add_argument("--batch", type=int, default=32, help="per-job batch")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured window")
    parser.add_argument("--warmup", type=int, default=5, help="iterations before the window")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--timeout", type=float, default=300.0, help="extra seconds per run")
    args = parser.parse_args()
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.seconds <= 0 or args.batch < 1 or args.threads < 1 or args.warmup < 0:
        raise SystemExit("--seconds, --batch and --threads must be positive, --warmup >= 0")
    pairs = parse_pairs(args.pairs, args.batch)
    offered = modes_offered(args.device)
    started = time.perf_counter()
    rows = []
    for left, right in pairs:
        solo = [run_together([job], args)[0] for job in (left, right)]
        row: dict[str, Any] = {
            "jobs": [
                {"model": j.model, "depth": j.depth, "batch": j.batch, "idle_ms": j.idle_ms}
                for j in (left, right)
            ],
            "solo": solo,
        }
        for mode, missing in offered.items():
            if missing is not None:
                row[mode] = {"unavailable": missing}
                continue
            if mode == "mps":
                with mps_daemon():
                    shared = run_together([left, right], args)
            else:
                shared = run_together([left, right], args)
            row[mode] = {"shared": shared, "fraction_of_solo": fractions(solo, shared)}
        rows.append(row)
    device_name = (
        torch.cuda.get_device_name(torch.device(args.device))
        if args.device.startswith("cuda")
        else platform.processor() or platform.machine()
    )
    print(
        json.dumps(
            {
                "bench": "colocation_measure",
                "device": args.device,
                "device_name": device_name,
                "cpu_count": os.cpu_count(),
                "torch": torch.__version__,
                "settings": {
                    "batch": args.batch,
                    "seconds": args.seconds,
                    "warmup": args.warmup,
                    "threads_per_process": args.threads,
                },
                "rows": rows,
                "wall_s": round(time.perf_counter() - started, 1),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
