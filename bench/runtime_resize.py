"""What a resize costs on the Ray runtime, by model size: from the scheduler's decision
(``RayExecutor.resize``) to the gang of the new size training again.

For each model one job (batch_policy fixed, global batch 12, leases of 10, control points every
5 iterations) runs on a private local Ray at 2 workers; it is resized to 3 workers, then back
to 2. Each resize is timed in phases: the old gang reaching its control point, checkpointing
and releasing its GPUs (``stop_s``), then the new gang reserving its placement group, starting
its actors, joining the process group and restoring (``start_s``), until it reports
``Started``; ``first_lease_s`` runs to its first reported lease. The checkpoint's size is what
rank 0 wrote.

    python -m bench.runtime_resize     # prints one JSON object
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.runtime_common import executor, provenance, start_local_ray, stop_local_ray
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.executor_events import Failed, Progressed, Started
from jigsaw.model.plan import full_backprop
from worker.ray_executor import RayExecutor
from worker.runtime.checkpoints import CheckpointStore

MODELS = ("mlp", "digits_cnn", "digits_wide_mlp", "resnet18_32")
GLOBAL_BATCH = 12
SIZES = (2, 3, 2)
LEASE = 10
CONTROL_EVERY = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    temp_dir = start_local_ray()
    rows = []
    try:
        for model in args.models.split(","):
            with tempfile.TemporaryDirectory(prefix="jrb-ckpt-") as root:
                rows += measure(Path(root), model)
    finally:
        stop_local_ray(temp_dir)
    result = {
        "benchmark": "runtime_resize",
        "global_batch": GLOBAL_BATCH,
        "lease_iterations": LEASE,
        "control_every": CONTROL_EVERY,
        "resizes": rows,
        "provenance": provenance(),
    }
    print(json.dumps(result, indent=2))


def elastic_job(model: str) -> Job:
    spec = JobSpec(
        name=model,
        model=model,
        workers=SIZES[0],
        iterations=1_000_000,
        batch_size=GLOBAL_BATCH // SIZES[0],
        spb="none",
        min_workers=min(SIZES),
        max_workers=max(SIZES),
    )
    return Job(id=f"resize-{model}", spec=spec, submitted_at=time.time(), attempt=1)


def measure(root: Path, model: str) -> list[dict[str, Any]]:
    runner = executor(root, lease_iterations=LEASE, control_every=CONTROL_EVERY)
    job = elastic_job(model)
    blocks = 4
    placement = tuple((0, gpu) for gpu in range(SIZES[0]))
    runner.start(job, placement, full_backprop(SIZES[0], blocks))
    rows = []
    try:
        await_event(runner, Started)
        await_event(runner, Progressed)
        for before, after in itertools.pairwise(SIZES):
            old = runner.gang(job.id)
            assert old is not None
            placement = tuple((0, gpu) for gpu in range(after))
            decided = time.perf_counter()
            runner.resize(job.id, placement, full_backprop(after, blocks), GLOBAL_BATCH // after)
            old.join(300)
            stopped = time.perf_counter()
            await_event(runner, Started)
            started = time.perf_counter()
            await_event(runner, Progressed)
            leased = time.perf_counter()
            latest = CheckpointStore(root, job.id).latest()
            assert latest is not None
            rows.append(
                {
                    "model": model,
                    "from_workers": before,
                    "to_workers": after,
                    "checkpoint_bytes": sum(
                        f.stat().st_size for f in latest[1].iterdir() if f.is_file()
                    ),
                    "stop_s": round(stopped - decided, 3),
                    "start_s": round(started - stopped, 3),
                    "resize_s": round(started - decided, 3),
                    "first_lease_s": round(leased - started, 3),
                }
            )
    finally:
        runner.shutdown()
    return rows


def await_event(runner: RayExecutor, kind: type, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for event in runner.poll(time.time()):
            if isinstance(event, Failed):
                raise RuntimeError(event.reason)
            if isinstance(event, kind):
                return
        time.sleep(0.02)
    raise TimeoutError(f"no {kind.__name__} within {timeout_s}s")


if __name__ == "__main__":
    main()
