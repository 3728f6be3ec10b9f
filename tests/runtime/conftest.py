"""Fixtures for the Ray runtime tests: one local Ray for the whole tests/runtime package (its
startup costs ~9 s on two cores; three modules use it)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="package")
def local_ray() -> Iterator[None]:
    """A private local Ray: 2 CPUs, 4 logical GPUs, its own short temp dir (socket paths must
    stay short), torn down after the package's last test. Never touches other Ray instances
    (the services other tests start call ray.init with num_cpus: always a new instance).
    Every test shuts its RayExecutor down, which kills its gangs and placement groups."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    temp_dir = tempfile.mkdtemp(prefix="jr-", dir="/tmp")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    ray.init(
        num_cpus=2,
        num_gpus=4,
        include_dashboard=False,
        log_to_driver=False,
        namespace="jigsaw-tests",
        _temp_dir=temp_dir,
        runtime_env={
            "env_vars": {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        },
    )
    try:
        yield
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)
