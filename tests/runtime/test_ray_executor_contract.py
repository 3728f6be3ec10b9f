"""The Ray executor answers the Executor seam as the simulated executors do
(tests/core/executor_contract.py): a resize or a re-plan of a job it holds no gang for is
refused with ``ReplanRefused`` and changes nothing. On a real local Ray; no gang starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.executor_contract import (
    replan_without_a_gang_is_refused,
    resize_without_a_gang_is_refused,
)
from worker.ray_executor import RayExecutor
from worker.runtime.settings import RuntimeSettings

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("local_ray")]


def test_a_job_without_a_gang_cannot_be_resized_or_replanned(tmp_path: Path) -> None:
    executor = RayExecutor(RuntimeSettings(checkpoint_dir=tmp_path / "ckpt"))
    try:
        resize_without_a_gang_is_refused(executor, "ghost")
        replan_without_a_gang_is_refused(executor, "ghost")
    finally:
        executor.shutdown()
