"""The oracle as the step-time model's prior: the one fit run on the oracle's predictions
before a job reports, replaced by the fit on its measurements once it has."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from jigsaw.goodput import BatchLimits, GoodputModel, StepObservation, fit_step_times
from jigsaw.goodput.calibration import errors
from jigsaw.goodput.prior import (
    OraclePriorSource,
    oracle_observations,
    oracle_step_times,
    prior_placements,
    prior_replicas,
)
from jigsaw.goodput.source import JobGoodput
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.hardware import preset
from jigsaw.oracle import Oracle

ORACLE = Oracle(preset("t4"))


def test_the_grid_covers_sizes_and_both_sides_of_a_node() -> None:
    assert prior_replicas(12) == [1, 2, 4, 8, 12]
    compact, split = prior_placements(4, 4)
    assert len({g[0] for g in compact}) == 1 and len({g[0] for g in split}) == 2
    assert prior_placements(1, 4) == [((0, 0),)]


def test_the_prior_reproduces_the_oracle_it_was_fitted_to() -> None:
    model = oracle_step_times(ORACLE, "resnet18_32", 64, 4, 16)
    grid = oracle_observations(ORACLE, "resnet18_32", [32, 64, 128], 4, 16)
    assert errors(model, grid).step_mape < 0.10
    # It scales as the oracle does: more workers, more samples per second, but not linearly.
    one = 64 / float(model.iteration_s(1, 1, 64, 0))
    eight = 8 * 64 / float(model.iteration_s(2, 8, 64, 0))
    assert 1.5 * one < eight < 8 * one


@dataclass
class _Measured:
    answer: JobGoodput | None

    def job_goodput(self, job: Job, now: float) -> JobGoodput | None:
        del job, now
        return self.answer


def _job() -> Job:
    spec = JobSpec(name="j", model="resnet18_32", workers=2, iterations=10, batch_size=64)
    return Job(id="j", spec=spec, submitted_at=0.0)


def test_measurements_win_and_the_prior_fills_what_they_leave_out() -> None:
    limits = BatchLimits(128, 128, 1, 128, accumulation=False)
    measured_model = GoodputModel(
        fit_step_times([StepObservation(1, 2, 64, 0.5, 0.1)]), None, limits
    )
    job = _job()
    source = OraclePriorSource(ORACLE, 4, _Measured(JobGoodput(limits, measured_model, 2)))
    assert source.job_goodput(job, 0.0) == JobGoodput(limits, measured_model, 2)
    nothing_yet = OraclePriorSource(ORACLE, 4, _Measured(JobGoodput(limits, None, 0)))
    prior = nothing_yet.job_goodput(job, 0.0)
    assert prior is not None and prior.model is not None and prior.largest_measured == 0
    assert prior.limits == limits
    assert prior.model.step_times == OraclePriorSource(ORACLE, 4).prior(job)
    # A rigid job, no source at all: the prior, at the job's one global batch.
    alone = OraclePriorSource(ORACLE, 4).job_goodput(job, 0.0)
    assert alone is not None and alone.model is not None
    assert (alone.limits.min_batch, alone.limits.max_batch) == (128, 128)
    assert alone.model.best(1, 2).goodput > 0


def test_a_model_the_oracle_cannot_price_gets_no_prior() -> None:
    spec = JobSpec(name="j", model="my.pkg:train", workers=1, iterations=10)
    job = Job(id="j", spec=spec, submitted_at=0.0)
    assert OraclePriorSource(ORACLE, 4).job_goodput(job, 0.0) is None
    with pytest.raises(InvalidSpecError, match=r"my\.pkg:train"):
        oracle_step_times(ORACLE, "my.pkg:train", 32, 4, 4)
