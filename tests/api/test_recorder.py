"""The scheduler's record of its rounds (issue 30): every decision type the cycle applies is
recorded and shown by ``GET /api/v1/scheduler``, and an error while recording one decision
loses neither the round's other decisions nor its heartbeat."""

from __future__ import annotations

import logging
import time
from typing import Any, get_args

import pytest

from api.scheduler.recorder import ProgressRecorder, RoundRecorder
from api.store import SqlStore
from api.store.telemetry import Telemetry
from jigsaw.model.cluster import Cluster, Placement
from jigsaw.model.decisions import Decision, DecisionKind, Preempt, Replan, Resize, Start
from jigsaw.model.domain import Job, JobSpec, submitted_event
from jigsaw.model.executor_events import Failed
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import full_backprop
from jigsaw.scheduling.clock import VirtualClock
from jigsaw.scheduling.cycle import SchedulingCycle
from tests.api.conftest import ApiClient
from tests.core.elastic_support import ELASTIC, Scripted

CLUSTER = Cluster.uniform(4, 4)
A2: Placement = ((0, 0), (0, 1))
A1: Placement = ((0, 0),)
B: Placement = ((0, 2),)
C: Placement = ((0, 3),)


def add(store: SqlStore, job_id: str, workers: int, **spec: Any) -> None:
    job = Job(
        id=job_id,
        spec=JobSpec(name=job_id, model="mlp", workers=workers, iterations=10**6, **spec),
        submitted_at=time.time(),
    )
    store.add(job, submitted_event(job, "test"))


def every_decision_type() -> list[list[Decision]]:
    """Round 1 starts a (elastic, 2 GPUs), b and c; round 2 resizes a to 1 GPU, re-plans b and
    preempts c: one decision of every type."""
    second: list[Decision] = [
        Resize("a", A1, full_backprop(1, 2), 16, "shrink a to 1 GPU"),
        Replan("b", full_backprop(1, 2), B, "re-plan b"),
        Preempt("c", "make room"),
    ]
    first: list[Decision] = [
        Start("a", A2, full_backprop(2, 2), "start a", worker_batch=16),
        Start("b", B, full_backprop(1, 2), "start b"),
        Start("c", C, full_backprop(1, 2), "start c"),
    ]
    emitted = {type(decision) for decision in first + second}
    assert emitted == set(get_args(Decision)), "emit one decision of every type"
    return [first, second]


def scripted_rounds(
    api: ApiClient, rounds: list[list[Decision]], recorder: RoundRecorder, store: SqlStore
) -> list[Any]:
    """Run ``rounds`` through a real cycle on ``api``'s database, recorded as the service
    records its rounds (``on_decision``, then ``after_round``); returns the reports."""
    from jigsaw.simulator.rate_executor import ConstantRate, RateDrivenExecutor

    clock = VirtualClock(time.time())
    cycle = SchedulingCycle(
        SqlStore(api.state.engine, epoch=1),
        RateDrivenExecutor(ConstantRate(10.0)),
        Scripted(rounds),
        clock,
        lambda: CLUSTER,
        on_decision=lambda now, decision: recorder.on_decision(store, now, decision),
    )
    reports = []
    for _ in range(len(rounds)):
        report = cycle.run_once()
        recorder.after_round(report, CLUSTER)
        reports.append(report)
        clock.advance_to(clock.now() + 1.0)
    return reports


def lead(api: ApiClient) -> None:
    with api.state.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE scheduler_leader SET epoch = 1")


def scheduler(api: ApiClient) -> Any:
    response = api.client.get("/api/v1/scheduler", headers=api.headers("admin"))
    assert response.status_code == 200, response.text
    return response.json()


def test_every_decision_type_has_its_own_kind_and_the_api_accepts_each() -> None:
    kinds = [decision_type.kind for decision_type in get_args(Decision)]
    assert len(set(kinds)) == len(kinds)
    assert set(kinds) == set(get_args(DecisionKind))


def test_every_decision_type_is_recorded_and_shown_by_get_scheduler(any_api: ApiClient) -> None:
    """On SQLite and on Postgres: a round holding a resize, a re-plan and a preemption is
    recorded whole."""
    lead(any_api)
    store = SqlStore(any_api.state.engine, epoch=1)
    add(store, "a", 2, batch_size=16, **ELASTIC)
    add(store, "b", 1)
    add(store, "c", 1)
    recorder = RoundRecorder(any_api.state.engine, any_api.state.metrics, 1, "scripted")
    reports = scripted_rounds(any_api, every_decision_type(), recorder, store)
    assert [report.applied for report in reports] == [3, 3]
    shown = scheduler(any_api)
    assert shown["round"] == 2
    assert [(d["kind"], d["job_id"]) for d in shown["last_decisions"]] == [
        ("start", "a"),
        ("start", "b"),
        ("start", "c"),
        ("resize", "a"),
        ("replan", "b"),
        ("preempt", "c"),
    ]
    assert shown["last_decisions"][3]["reason"] == "shrink a to 1 GPU"
    assert store.get("a").placement == A1 and store.get("c").state is JobState.PREEMPTED


class FailingStore(SqlStore):
    """The store the recorder reads for its wait-time metric, broken: every read raises."""

    def get(self, job_id: str) -> Job:
        raise RuntimeError(f"cannot read {job_id}: the disk is on fire")


def test_a_recorder_that_raises_loses_no_decision_and_no_heartbeat(
    api: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    lead(api)
    store = SqlStore(api.state.engine, epoch=1)
    for job_id in ("a", "b", "c"):
        add(store, job_id, 1)
    places = {"a": A1, "b": B, "c": C}
    rounds: list[list[Decision]] = [
        [Start(job_id, place, full_backprop(1, 2), "go") for job_id, place in places.items()]
    ]
    recorder = RoundRecorder(api.state.engine, api.state.metrics, 1, "scripted")
    before = time.time()
    with caplog.at_level(logging.ERROR, logger="api.scheduler.recorder"):
        scripted_rounds(api, rounds, recorder, FailingStore(api.state.engine, epoch=1))
    assert {store.get(job_id).state for job_id in "abc"} == {JobState.ADMITTED}
    leader = api.state.store.leader_state()
    assert leader is not None and leader.round == 1
    assert leader.heartbeat_at is not None and leader.heartbeat_at >= before
    assert [d["job_id"] for d in leader.last_decisions] == ["a", "b", "c"]
    failures = [r for r in caplog.records if "could not record the start" in r.getMessage()]
    assert len(failures) == 3 and all(r.exc_info for r in failures)


def test_a_failed_gangs_traceback_and_output_tail_land_in_the_jobs_log(api: ApiClient) -> None:
    """What the Ray executor reports with a failure is what ``jigsaw-cli logs`` prints."""
    job = api.submit()
    store = SqlStore(api.state.engine)
    telemetry = Telemetry(api.state.engine, cap_per_job=100)
    detail = (
        "worker traceback:",
        '  File "mine/models.py", line 3, in build',
        "TypeError: build() missing 1 required positional argument: 'width'",
        "rank 0 stdout (last 1 lines):",
        "  loading shards",
    )
    reason = "building model 'mine.models:build' raised TypeError: ..."
    ProgressRecorder(store, telemetry, 20)(
        Failed(str(job["id"]), time.time(), reason, detail=detail, attempt=1)
    )
    response = api.client.get(f"/api/v1/jobs/{job['id']}/logs", headers=api.headers("alice"))
    assert response.status_code == 200, response.text
    lines = [item["line"] for item in response.json()["items"]]
    assert lines[-6:] == [f"gang failed: {reason}", *detail]


class BrokenTelemetry(Telemetry):
    """Telemetry whose every write raises something other than a database error."""

    def record(self, sample: Any, log_line: str | None = None) -> None:
        raise ValueError("a sample nobody can store")


def test_an_error_recording_progress_never_loses_the_report(api: ApiClient) -> None:
    """The executor's reports reach the cycle once: a Finished the recorder chokes on must
    still finish the job."""
    from jigsaw.simulator.rate_executor import ConstantRate, RateDrivenExecutor

    lead(api)
    store = SqlStore(api.state.engine, epoch=1)
    job = Job(id="a", spec=JobSpec(name="a", model="mlp", workers=1, iterations=10), submitted_at=0)
    store.add(job, submitted_event(job, "test"))
    clock = VirtualClock(time.time())
    cycle = SchedulingCycle(
        store,
        RateDrivenExecutor(ConstantRate(10.0), report_progress=True),
        Scripted([[Start("a", A1, full_backprop(1, 2), "go")]]),
        clock,
        lambda: CLUSTER,
        on_event=ProgressRecorder(store, BrokenTelemetry(api.state.engine), 5),
    )
    for _ in range(4):
        cycle.run_once()
        clock.advance_to(clock.now() + 1.0)
    assert store.get("a").state is JobState.SUCCEEDED
