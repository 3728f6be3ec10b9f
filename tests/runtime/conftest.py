"""Fixtures for the Ray runtime tests: one local Ray per test module (startup costs seconds)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A private local Ray: 2 CPUs, 4 logical GPUs, its own short temp dir (socket paths must
    stay short), torn down after the module. Never touches other Ray instances."""
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
