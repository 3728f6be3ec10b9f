"""The service's goodput source: lease reports become step-time rows, the rows a GoodputModel,
and pollux, served with the simulated executor, resizes an elastic job from them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

from api.db import make_engine
from api.goodput_source import LeaseGoodputSource, StepTimeRecorder
from api.metrics import Metrics
from api.migrate import upgrade_to_head
from api.oracle_view import oracle_view_for
from api.scheduler.service import SchedulerService
from api.settings import Settings
from api.store import SqlStore
from jigsaw.model.domain import Job, JobSpec, submitted_event, transition
from jigsaw.model.executor_events import Progressed
from jigsaw.model.lease_outcome import LeaseOutcome, LeaseTimings, RankCosts
from jigsaw.model.lifecycle import JobState

ELASTIC = {
    "min_workers": 1,
    "max_workers": 4,
    "batch_policy": "adaptive",
    "min_global_batch": 16,
    "max_global_batch": 64,
}


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    made = make_engine(f"sqlite:///{tmp_path}/goodput.db")
    upgrade_to_head(made)
    return made


def _running(store: SqlStore, job_id: str, placement: tuple[tuple[int, int], ...]) -> Job:
    spec = JobSpec(name=job_id, model="mlp", workers=2, iterations=10_000, batch_size=8, **ELASTIC)
    job = Job(id=job_id, spec=spec, submitted_at=0.0)
    job = store.add(job, submitted_event(job, "test"))
    for state in (JobState.ADMITTED, JobState.RUNNING):
        changes = {"placement": placement, "attempt": 1} if state is JobState.ADMITTED else {}
        moved, event = transition(job, state, reason="test", at=1.0, actor="test", **changes)
        job = store.save(moved, expected_version=job.version, event=event)
    return job


def _outcome(iteration_s: float, sync_s: float) -> LeaseOutcome:
    timings = LeaseTimings(1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, iteration_s=iteration_s)
    ranks = tuple(RankCosts(iteration_s - sync_s, sync_s, 0, 0, 0) for _ in range(2))
    return LeaseOutcome(lease=1, attempt=1, iterations=10, timings=timings, ranks=ranks)


def test_lease_reports_become_a_goodput_model(engine: Engine) -> None:
    store = SqlStore(engine)
    job = _running(store, "e", ((0, 0), (1, 0)))  # 2 workers over 2 nodes, 8 samples each
    recorder, source = StepTimeRecorder(store, engine), LeaseGoodputSource(engine)
    before = source.job_goodput(job, 2.0)
    assert before is not None and before.model is None and before.largest_measured == 0
    recorder(Progressed("e", 2.0, 10.0, _outcome(0.20, 0.05)))
    recorder(Progressed("e", 3.0, 20.0, _outcome(0.30, 0.05)))
    (observation,) = source.observations("e")
    assert (observation.nodes, observation.replicas, observation.atomic_bsz) == (2, 2, 8.0)
    assert observation.step_s == pytest.approx(0.25)  # the mean of the two reports
    assert observation.sync_s == pytest.approx(0.05)
    after = source.job_goodput(job, 3.0)
    assert after is not None and after.model is not None and after.largest_measured == 2
    predicted = after.model.step_times.iteration_s(2, 2, 8, 0)
    assert float(predicted) == pytest.approx(0.25, rel=0.05)
    rigid = JobSpec(name="r", model="mlp", workers=2, iterations=10)
    assert source.job_goodput(Job(id="r", spec=rigid, submitted_at=0.0), 3.0) is None


def test_an_executor_that_reports_progress_only_is_timed_between_reports(engine: Engine) -> None:
    store = SqlStore(engine)
    _running(store, "e", ((0, 0),))
    recorder, source = StepTimeRecorder(store, engine), LeaseGoodputSource(engine)
    recorder(Progressed("e", 2.0, 10.0))  # the first report only starts the clock
    assert source.observations("e") == ()
    recorder(Progressed("e", 4.0, 50.0))
    (observation,) = source.observations("e")
    assert observation.step_s == pytest.approx(2.0 / 40)
    assert observation.sync_s == 0.0


def test_pollux_in_the_service_resizes_an_elastic_job_from_its_reports(tmp_path: Path) -> None:
    """Served by pollux with the simulated executor, an elastic job starts on one GPU (it
    has measured nothing), reports its step time there, and is grown: before the service had
    a goodput source, pollux kept every job at the size it asked for."""
    url = f"sqlite:///{tmp_path}/service.db"
    settings = Settings(
        database_url=url,
        data_dir=tmp_path,
        config_path=tmp_path / "config.toml",
        policy="pollux",
        policy_options={"restart_s": 0.2},
        round_seconds=0.05,
        gpus=4,
        gpus_per_node=4,
        sim_iterations_per_second=20.0,
    )
    engine = make_engine(url)
    upgrade_to_head(engine)
    store = SqlStore(engine)
    spec = JobSpec(name="e", model="mlp", workers=2, iterations=100_000, batch_size=8, **ELASTIC)
    job = Job(id="e", spec=spec, submitted_at=time.time())
    store.add(job, submitted_event(job, "test"))
    service = SchedulerService(settings, engine, Metrics(engine), oracle_view_for(settings))
    service.start_in_thread()
    try:
        deadline = time.monotonic() + 60
        while store.get("e").resizes == 0:
            assert time.monotonic() < deadline, f"never resized: {store.get('e')}"
            time.sleep(0.05)
    finally:
        service.stop()
    grown = store.get("e")
    assert len(grown.placement) > 1
    measured = LeaseGoodputSource(engine).job_goodput(grown, time.time())
    assert measured is not None and measured.model is not None
    assert measured.largest_measured >= 1
    engine.dispose()
