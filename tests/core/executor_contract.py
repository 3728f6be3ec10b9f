"""The Executor seam's answers every executor must give alike (jigsaw.scheduling.seams), as
cases run against each executor: the rate executor and the replay executor here
(tests/core/domain/test_executor_contract.py), the Ray executor on a real local Ray
(tests/runtime/test_ray_executor_contract.py)."""

from __future__ import annotations

import pytest

from jigsaw.model.plan import full_backprop
from jigsaw.scheduling.seams import Executor, ReplanRefused

TWO_GPUS = ((0, 0), (0, 1))


def resize_without_a_gang_is_refused(executor: Executor, job_id: str) -> None:
    """``resize`` of a job the executor holds no gang for raises ``ReplanRefused`` and
    changes nothing: no gang appears, none of the others goes."""
    before = executor.running_jobs()
    assert job_id not in before
    with pytest.raises(ReplanRefused, match=f"job {job_id} has no gang to resize"):
        executor.resize(job_id, TWO_GPUS, full_backprop(2, 4), 16)
    assert executor.running_jobs() == before


def replan_without_a_gang_is_refused(executor: Executor, job_id: str) -> None:
    """``replan`` answers the same."""
    before = executor.running_jobs()
    with pytest.raises(ReplanRefused, match=f"job {job_id} has no gang to re-plan"):
        executor.replan(job_id, TWO_GPUS, full_backprop(2, 4))
    assert executor.running_jobs() == before
