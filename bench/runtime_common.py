"""Shared driver for the Ray runtime benchmarks: a private local Ray, jobs launched straight
through the RayExecutor seam, and what each gang reported."""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
import torch

from bench import command_line
from jigsaw.model.cluster import Placement
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.executor_events import ExecutorEvent, Failed, Finished, Started
from jigsaw.model.hardware import preset
from jigsaw.model.plan import Plan, SPBPlan
from jigsaw.oracle import Oracle
from worker.ray_executor import RayExecutor
from worker.runtime.gang import Gang
from worker.runtime.settings import RuntimeSettings

REPO = Path(__file__).resolve().parents[1]


def provenance() -> dict[str, Any]:
    return {
        "command": command_line(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "torch_version": torch.__version__,
        "ray_version": ray.__version__,
        "machine": f"{platform.machine()} {os.cpu_count()} CPU cores (shared with other work), "
        "no GPU: Ray GPUs are logical, workers train on the CPU with gloo",
    }


def start_local_ray(num_cpus: int = 2, num_gpus: int = 4) -> str:
    temp_dir = tempfile.mkdtemp(prefix="jrb-", dir="/tmp")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    ray.init(
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        include_dashboard=False,
        log_to_driver=False,
        namespace="jigsaw-bench",
        _temp_dir=temp_dir,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}},
    )
    return temp_dir


def stop_local_ray(temp_dir: str) -> None:
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


def executor(checkpoint_dir: Path, **settings: Any) -> RayExecutor:
    return RayExecutor(RuntimeSettings(checkpoint_dir=checkpoint_dir, **settings))


def spb_plan(depths: tuple[int, ...], model: str = "digits_cnn") -> SPBPlan:
    """Stop depths resolved for ``model``'s blocks (the executor takes a resolved plan)."""
    return SPBPlan(depths, Oracle(preset("cpu")).num_blocks(model))


def job(
    job_id: str, iterations: int, workers: int = 2, model: str = "digits_cnn", batch: int = 32
) -> Job:
    spec = JobSpec(
        name=job_id, model=model, workers=workers, iterations=iterations, batch_size=batch
    )
    return Job(id=job_id, spec=spec, submitted_at=time.time(), attempt=1)


@dataclass
class JobRun:
    job_id: str
    started_at: float | None = None
    finished_at: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    leases: list[dict[str, Any]] = field(default_factory=list)
    gang: Gang | None = None

    @property
    def training_s(self) -> float:
        assert self.started_at is not None and self.finished_at is not None
        return self.finished_at - self.started_at - float(self.metrics.get("eval_s", 0.0))


def run_jobs(
    runner: RayExecutor,
    launches: list[tuple[Job, Placement, Plan]],
    *,
    while_running: Callable[[RayExecutor, dict[str, JobRun]], None] | None = None,
    timeout_s: float = 600.0,
) -> dict[str, JobRun]:
    """Start every job at once, poll until all finished; ``while_running`` is called between
    polls (benchmarks use it to re-plan). Raises on a failure."""
    runs = {j.id: JobRun(j.id) for j, _, _ in launches}
    for launched, placement, plan in launches:
        runner.start(launched, placement, plan)
        runs[launched.id].gang = runner.gang(launched.id)
    deadline = time.monotonic() + timeout_s
    while any(r.finished_at is None for r in runs.values()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs did not finish in {timeout_s}s")
        for event in runner.poll(time.time()):
            handle(runs[event.job_id], event)
        if while_running is not None:
            while_running(runner, runs)
        time.sleep(0.05)
    return runs


def handle(run: JobRun, event: ExecutorEvent) -> None:
    if isinstance(event, Started):
        run.started_at = event.at
    elif isinstance(event, Finished):
        run.finished_at = event.at
        run.metrics = dict(event.metrics)
    elif isinstance(event, Failed):
        raise RuntimeError(f"{event.job_id} failed: {event.reason}")
    if run.gang is not None:
        run.leases = [outcome.as_metrics() for outcome in run.gang.reports]
