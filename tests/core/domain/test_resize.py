"""Resizing a running job: the decision, the cycle that applies it, the simulated executors
that restart the gang, and the spec fields that allow it (issue 23, simulation side)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from jigsaw.model.cluster import GpuId, Placement
from jigsaw.model.decisions import Resize, Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.executor_events import Progressed
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import Plan, full_backprop
from jigsaw.model.reasons import ReasonCode
from jigsaw.scheduling.clock import VirtualClock
from jigsaw.scheduling.memstore import InMemoryStore
from jigsaw.simulator.decisionlog import describe
from jigsaw.simulator.rate_executor import ConstantRate, RateDrivenExecutor
from jigsaw.simulator.rates import OverheadModel
from jigsaw.simulator.replay_executor import ReplayExecutor
from tests.core.elastic_support import ELASTIC, FOUR, TWO, elastic_job, scripted_cycle


class BatchSeen(ConstantRate):
    """ConstantRate that remembers the per-worker batch of every gang it rates."""

    def __init__(self, seen: list[int], *args: Any) -> None:
        super().__init__(*args)
        object.__setattr__(self, "seen", seen)

    def rate(
        self, job: Job, placement: Placement, plan: Plan, other_load: Mapping[GpuId, float]
    ) -> float:
        self.seen.append(job.current_worker_batch)  # type: ignore[attr-defined]
        return super().rate(job, placement, plan, other_load)


def test_a_resize_changes_size_and_batch_records_an_event_and_costs_a_restart() -> None:
    seen: list[int] = []
    executor = RateDrivenExecutor(BatchSeen(seen, 10.0, 5.0))  # 10 it/s, 5 s to (re)start
    grow = Resize("e", FOUR, full_backprop(4, 1), 24, "grow: idle GPUs")
    start = Start("e", TWO, full_backprop(2, 1), "go", worker_batch=16)
    store, clock, cycle = scripted_cycle([[start], [], [grow]], executor)
    elastic_job(store)
    cycle.run_once()  # t=0: admitted; the gang is up at 5 s
    clock.advance_to(5.0)
    cycle.run_once()  # RUNNING
    clock.advance_to(10.0)
    report = cycle.run_once()  # 50 iterations done on 2 GPUs; resized to 4
    assert report.applied == 1
    job = store.get("e")
    assert (job.state, job.placement, job.plan, job.worker_batch) == (
        JobState.RUNNING,
        FOUR,
        full_backprop(4, 1),
        24,
    )
    assert job.attained_gpu_seconds == pytest.approx(2 * 5.0)  # counted at the old size
    assert job.run_started_at == 10.0 and job.reason == "grow: idle GPUs"
    event = store.events("e")[-1]
    assert (event.from_state, event.to_state, event.code, event.reason) == (
        JobState.RUNNING,
        JobState.RUNNING,
        ReasonCode.RESIZED,
        "grow: idle GPUs",
    )
    assert seen[-1] == 24  # the restarted gang runs the new per-worker batch
    clock.advance_to(29.9)  # 5 s of restart, then 150 iterations at 10 it/s: done at 30 s
    cycle.run_once()
    assert store.get("e").state == JobState.RUNNING
    clock.advance_to(30.0)
    cycle.run_once()
    job = store.get("e")
    assert (job.state, job.finished_at) == (JobState.SUCCEEDED, pytest.approx(30.0))


def test_only_a_running_job_is_resized() -> None:
    executor = RateDrivenExecutor(ConstantRate(10.0, 5.0))
    start = Start("e", TWO, full_backprop(2, 1), "go")
    store, _clock, cycle = scripted_cycle(
        [[start], [Resize("e", FOUR, full_backprop(4, 1), 8, "too early")]], executor
    )
    elastic_job(store)
    cycle.run_once()
    report = cycle.run_once()  # still ADMITTED: its workers are not up
    assert (report.applied, report.skipped) == (0, 1)
    assert store.get("e").placement == TWO
    assert all(e.code != ReasonCode.RESIZED for e in store.events("e"))


def test_the_replay_executor_charges_a_restart_and_reports_where_it_resumed() -> None:
    clock = VirtualClock()
    executor = ReplayExecutor(
        ConstantRate(10.0), OverheadModel(launch_s=0.0, restart_s=30.0, replan_s=1.0), clock
    )
    store = InMemoryStore()
    job = elastic_job(store)
    executor.start(job, TWO, full_backprop(2, 1))
    executor.poll(0.0)
    clock.advance_to(10.0)
    executor.poll(10.0)
    executor.resize("e", FOUR, full_backprop(4, 1), 8)
    assert executor.busy_gpus == 4
    reports = [e for e in executor.poll(10.0) if isinstance(e, Progressed)]
    assert [(r.job_id, r.iterations_done) for r in reports] == [("e", pytest.approx(100.0))]
    # 30 s of restart, then the new gang reports Started (the cycle measures the resize from
    # it, as from a Ray gang), then the last 100 iterations.
    assert [(type(e).__name__, e.at) for e in executor.poll(49.9)] == [("Started", 40.0)]
    assert [type(e).__name__ for e in executor.poll(50.0)] == ["Finished"]


def test_decision_log_lines_name_the_batch_only_where_a_policy_chose_it() -> None:
    plan = full_backprop(2, 1)
    assert describe(1.0, Start("j", TWO, plan, "r")) == "1.000 start j plan=0,0 gpus=0:0 0:1 (r)"
    assert describe(1.0, Start("j", TWO, plan, "r", worker_batch=8)) == (
        "1.000 start j plan=0,0 batch=8 gpus=0:0 0:1 (r)"
    )
    assert describe(2.0, Resize("j", FOUR, full_backprop(4, 1), 8, "g")) == (
        "2.000 resize j plan=0,0,0,0 batch=8 gpus=0:0 0:1 0:2 0:3 (g)"
    )


# -- the spec ---------------------------------------------------------------------------------


def test_an_elastic_spec_knows_its_ranges() -> None:
    spec = JobSpec(name="e", model="mlp", workers=2, iterations=10, batch_size=16, **ELASTIC)
    assert (spec.worker_range, spec.batch_range, spec.global_batch, spec.is_elastic) == (
        (1, 4),
        (16, 128),
        32,
        True,
    )
    rigid = JobSpec(name="r", model="mlp", workers=2, iterations=10, batch_size=16)
    assert (rigid.worker_range, rigid.batch_range, rigid.is_elastic) == ((2, 2), (32, 32), False)
    fixed = JobSpec(name="f", model="mlp", workers=2, iterations=10, batch_size=6, max_workers=4)
    assert fixed.is_elastic and fixed.batch_range == (12, 12)


@pytest.mark.parametrize(
    "fields,field",
    [
        ({"min_workers": 3, "max_workers": 4}, "workers"),
        ({"min_workers": 4, "max_workers": 3}, "min_workers"),
        ({"max_workers": 0}, "max_workers"),
        ({"batch_policy": "elastic"}, "batch_policy"),
        ({"batch_policy": "adaptive", "max_global_batch": 64}, "min_global_batch"),
        ({"batch_policy": "adaptive", "min_global_batch": 16}, "max_global_batch"),
        (
            {"batch_policy": "adaptive", "min_global_batch": 64, "max_global_batch": 128},
            "batch_size",
        ),
        ({"min_global_batch": 16}, "min_global_batch"),
        ({"max_workers": 3}, "batch_size"),  # fixed 32 samples do not split over 3 workers
        ({"max_workers": 4, "parallelism": "pipeline"}, "max_workers"),
        (
            {
                "batch_policy": "adaptive",
                "min_global_batch": 16,
                "max_global_batch": 64,
                "parallelism": "hybrid",
            },
            "batch_policy",
        ),
    ],
)
def test_a_bad_elastic_request_names_the_field(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidSpecError) as error:
        JobSpec(name="e", model="mlp", workers=2, iterations=10, batch_size=16, **fields)
    assert error.value.field == field
    assert field in str(error.value) or field == "workers"


def test_a_mapping_may_leave_elastic_fields_null_but_not_mistyped() -> None:
    base = {"name": "e", "model": "mlp", "workers": 2, "iterations": 10}
    assert not JobSpec.from_mapping({**base, "min_workers": None}).is_elastic
    with pytest.raises(InvalidSpecError) as error:
        JobSpec.from_mapping({**base, "max_workers": "4"})
    assert error.value.field == "max_workers"
