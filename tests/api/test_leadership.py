"""One leader at a time; a leader whose epoch has passed cannot write (split brain)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import Engine, text

from api.db import make_engine
from api.metrics import Metrics
from api.oracle_view import OracleView
from api.scheduler.leader import (
    PostgresLeadership,
    SchedulerAlreadyRunningError,
    SqliteLeadership,
)
from api.scheduler.service import SchedulerService
from api.settings import Settings
from api.store import SqlStore, StaleEpochError
from jigsaw.model.cluster import Cluster
from jigsaw.model.domain import Job, JobSpec, submitted_event, transition
from jigsaw.model.hardware import preset
from jigsaw.model.lifecycle import JobState
from jigsaw.planning.planner import Planner
from jigsaw.policies import create_policy
from jigsaw.scheduling.clock import VirtualClock
from jigsaw.scheduling.cycle import SchedulingCycle
from jigsaw.simulator.rate_executor import ConstantRate, RateDrivenExecutor
from tests.conftest import REPO, ServerProcess, _libpq


@pytest.fixture
def pg_engine(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url)
    yield engine
    engine.dispose()


def terminate(engine: Engine, pid: int) -> None:
    """Cut a leader's lock connection, as a network partition would."""
    url = engine.url.render_as_string(hide_password=False)
    with psycopg.connect(_libpq(url), autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


def add_job(store: SqlStore, job_id: str, workers: int = 1, iterations: int = 20) -> Job:
    spec = JobSpec(name=job_id, model="mlp", workers=workers, iterations=iterations)
    job = Job(id=job_id, spec=spec, submitted_at=time.time())
    return store.add(job, submitted_event(job, "test"))


@pytest.mark.postgres
def test_postgres_admits_one_leader_and_bumps_the_epoch_on_takeover(pg_engine: Engine) -> None:
    first, second = PostgresLeadership(pg_engine, "a"), PostgresLeadership(pg_engine, "b")
    try:
        assert first.try_acquire() == 1
        assert second.try_acquire() is None
        assert first.still_leader()
        pid = first.backend_pid()
        assert pid is not None
        terminate(pg_engine, pid)
        assert not first.still_leader()
        assert second.try_acquire() == 2
        stale = SqlStore(pg_engine, epoch=1)
        job = add_job(SqlStore(pg_engine), "j1")
        moved, event = transition(job, JobState.CANCELLED, reason="x", at=1.0, actor="s")
        with pytest.raises(StaleEpochError):
            stale.save(moved, expected_version=job.version, event=event)
        SqlStore(pg_engine, epoch=2).save(moved, expected_version=job.version, event=event)
    finally:
        first.release()
        second.release()


def test_sqlite_refuses_a_second_scheduler_with_a_readable_message(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    first, second = SqliteLeadership(engine, "host:1"), SqliteLeadership(engine, "host:2")
    try:
        assert first.try_acquire() == 1
        with pytest.raises(SchedulerAlreadyRunningError, match=r"another scheduler \(host:1\)"):
            second.try_acquire()
        first.release()
        assert second.try_acquire() == 2
    finally:
        second.release()
        engine.dispose()


@pytest.mark.integration
def test_a_second_scheduler_process_on_sqlite_exits_with_one_line(server: ServerProcess) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "api", "--scheduler-only"],
        cwd=REPO,
        env=server.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "another scheduler" in result.stderr and "Traceback" not in result.stderr


class ObliviousLeadership(PostgresLeadership):
    """A leader that never notices it lost its lock (a long pause, a silent partition):
    only the epoch fence in SQL can stop its writes."""

    def still_leader(self) -> bool:
        return self._connection is not None


def service(engine: Engine, leadership: PostgresLeadership) -> SchedulerService:
    settings = Settings(database_url=str(engine.url), round_seconds=0.05, gpus=2)
    oracle = OracleView(Planner(preset("v100")), 4, settings.sim_iterations_per_second)
    return SchedulerService(settings, engine, Metrics(engine), oracle, leadership=leadership)


def wait_until(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


@pytest.mark.postgres
def test_split_brain_the_stale_leader_writes_nothing(pg_engine: Engine) -> None:
    store = SqlStore(pg_engine)
    for index in range(4):
        add_job(store, f"j{index}", workers=1, iterations=30)
    stale_lead = ObliviousLeadership(pg_engine, "old")
    old = service(pg_engine, stale_lead)
    old_thread = old.start_in_thread()
    wait_until(lambda: any(j.state == JobState.RUNNING for j in store.active_jobs()))
    pid = stale_lead.backend_pid()
    assert pid is not None
    new = service(pg_engine, PostgresLeadership(pg_engine, "new"))
    terminate(pg_engine, pid)
    new_thread = new.start_in_thread()
    wait_until(lambda: new.epoch == 2)
    try:
        wait_until(lambda: all(j.state.is_terminal for j in store.list_jobs()), timeout=60)
        with pg_engine.connect() as conn:
            took_over = conn.execute(text("SELECT acquired_at FROM scheduler_leader")).scalar()
            late = conn.execute(
                text("SELECT count(*) FROM job_events WHERE epoch = 1 AND at > :t"),
                {"t": took_over},
            ).scalar()
            holder = conn.execute(text("SELECT holder FROM scheduler_leader")).scalar()
        assert late == 0, "the stale leader wrote after the takeover"
        assert holder == "new"
        assert {j.state for j in store.list_jobs()} == {JobState.SUCCEEDED}
        wait_until(lambda: old.epoch is None)  # the fence made the old leader stand down
    finally:
        old.stop()
        new.stop()
    assert not old_thread.is_alive() and not new_thread.is_alive()


def test_sqlite_lock_file_sits_next_to_the_database(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    leadership = SqliteLeadership(engine, "me")
    try:
        leadership.try_acquire()
        assert Path(str(leadership.lock_path)).read_text() == "me"
        assert str(leadership.lock_path).endswith("jigsaw.db.scheduler.lock")
    finally:
        leadership.release()
        engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_stale_leaders_rounds_change_nothing(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """The old leader keeps running full rounds after a takeover: every write is refused."""
    if backend == "postgres":
        request.applymarker(pytest.mark.postgres)
    engine = make_engine(request.getfixturevalue(f"{backend}_url"))
    try:
        store = SqlStore(engine)
        for index in range(3):
            add_job(store, f"j{index}", workers=2, iterations=1000)
        clock = VirtualClock(time.time())
        old = SchedulingCycle(
            SqlStore(engine, epoch=1),
            RateDrivenExecutor(ConstantRate(10.0), report_progress=True),
            create_policy("fifo", planner=Planner()),
            clock,
            lambda: Cluster.uniform(4, 4),
        )
        with engine.begin() as conn:
            conn.execute(text("UPDATE scheduler_leader SET epoch = 1"))
        old.run_once()
        clock.advance_to(clock.now() + 1)
        old.run_once()
        before = {(j.id, j.version, j.state, j.iterations_done) for j in store.list_jobs()}
        assert any(state == JobState.RUNNING for _, _, state, _ in before)
        with engine.begin() as conn:  # a new leader takes over
            conn.execute(text("UPDATE scheduler_leader SET epoch = 2"))
        for _ in range(5):
            clock.advance_to(clock.now() + 50)  # long enough for the running jobs to finish
            with contextlib.suppress(StaleEpochError):  # the service stands down on this
                old.run_once()
        after = {(j.id, j.version, j.state, j.iterations_done) for j in store.list_jobs()}
        assert after == before
    finally:
        engine.dispose()
