"""One contract, three stores: InMemoryStore, the SQL store on SQLite, and on Postgres."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from api.db import make_engine
from api.store import SqlStore, StaleEpochError
from jigsaw.model.domain import Job, JobSpec, submitted_event, transition
from jigsaw.model.errors import ConflictError, JobNotFoundError
from jigsaw.model.lifecycle import JobState
from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from jigsaw.model.plan import Plan, SPBPlan
from jigsaw.scheduling.memstore import InMemoryStore
from jigsaw.scheduling.seams import Store


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    if request.param == "memory":
        yield InMemoryStore()
        return
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
        url = request.getfixturevalue("postgres_url")
    else:
        url = request.getfixturevalue("sqlite_url")
    engine = make_engine(url)
    yield SqlStore(engine)
    engine.dispose()


def new_job(job_id: str, at: float, **spec: object) -> Job:
    fields: dict[str, object] = {"name": job_id, "model": "mlp", "workers": 2, "iterations": 100}
    fields.update(spec)
    return Job(id=job_id, spec=JobSpec(**fields), submitted_at=at)  # type: ignore[arg-type]


def add(store: Store, job: Job) -> Job:
    return store.add(job, submitted_event(job, "test"))


def admit(store: Store, job: Job, at: float = 10.0) -> Job:
    moved, event = transition(
        job,
        JobState.ADMITTED,
        reason="fits",
        at=at,
        actor="scheduler",
        placement=((0, 0), (0, 1)),
        plan=SPBPlan((0, 1), 4),
        attempt=job.attempt + 1,
    )
    return store.save(moved, expected_version=job.version, event=event)


def test_add_then_get_round_trips_every_field(store: Store) -> None:
    job = new_job("a", 1.25, priority=7, spb="0,1", queue="q1", user="alice", seed=3)
    add(store, job)
    assert store.get("a") == job


def test_adding_the_same_id_twice_conflicts(store: Store) -> None:
    add(store, new_job("a", 1.0))
    with pytest.raises(ConflictError):
        add(store, new_job("a", 2.0))


def test_get_of_unknown_id_raises_not_found(store: Store) -> None:
    with pytest.raises(JobNotFoundError):
        store.get("nope")
    with pytest.raises(JobNotFoundError):
        store.events("nope")


def test_save_bumps_version_and_records_the_transition(store: Store) -> None:
    job = add(store, new_job("a", 1.0))
    saved = admit(store, job)
    assert saved.version == 1
    stored = store.get("a")
    assert stored == saved
    assert stored.placement == ((0, 0), (0, 1)) and stored.plan == SPBPlan((0, 1), 4)
    events = store.events("a")
    assert [(e.from_state, e.to_state) for e in events] == [
        (None, JobState.PENDING),
        (JobState.PENDING, JobState.ADMITTED),
    ]
    assert events[1].reason == "fits" and events[1].actor == "scheduler" and events[1].at == 10.0


def test_save_with_a_stale_version_conflicts_and_changes_nothing(store: Store) -> None:
    job = add(store, new_job("a", 1.0))
    admit(store, job)
    progressed = replace(job, iterations_done=5.0)
    with pytest.raises(ConflictError):
        store.save(progressed, expected_version=job.version)
    assert store.get("a").state == JobState.ADMITTED
    assert len(store.events("a")) == 2


def test_a_transition_from_a_state_that_is_not_its_source_is_refused(store: Store) -> None:
    job = add(store, new_job("a", 1.0))
    # Forge a RUNNING -> SUCCEEDED event while the stored job is PENDING (same version).
    forged, _ = transition(
        replace(job, state=JobState.RUNNING),
        JobState.SUCCEEDED,
        reason="forged",
        at=2.0,
        actor="test",
    )
    _, event = transition(
        replace(job, state=JobState.RUNNING), JobState.SUCCEEDED, reason="x", at=2.0, actor="t"
    )
    with pytest.raises(ConflictError):
        store.save(forged, expected_version=job.version, event=event)
    assert store.get("a").state == JobState.PENDING
    assert len(store.events("a")) == 1


def test_active_jobs_excludes_terminal_ones(store: Store) -> None:
    a = add(store, new_job("a", 1.0))
    add(store, new_job("b", 2.0))
    cancelled, event = transition(a, JobState.CANCELLED, reason="user", at=3.0, actor="alice")
    store.save(cancelled, expected_version=a.version, event=event)
    assert [job.id for job in store.active_jobs()] == ["b"]
    assert store.get("a").finished_at == 3.0


def test_active_jobs_come_in_arrival_order_whatever_the_insert_order(store: Store) -> None:
    # Out-of-order inserts and ties on submitted_at (broken by id): the cycle builds its
    # snapshot from this order without sorting.
    for job_id, at in [("d", 4.0), ("b", 2.0), ("c", 2.0), ("a", 2.0), ("e", 1.0)]:
        add(store, new_job(job_id, at))
    b = store.get("b")
    admit(store, b)  # a change of state keeps the job's place
    assert [job.id for job in store.active_jobs()] == ["e", "a", "b", "c", "d"]
    add(store, new_job("f", 5.0))
    add(store, new_job("g", 3.0))
    assert [job.id for job in store.active_jobs()] == ["e", "a", "b", "c", "g", "d", "f"]


def test_list_jobs_filters_orders_and_pages(store: Store) -> None:
    add(store, new_job("c", 3.0, user="bob", queue="q2"))
    add(store, new_job("a", 1.0, user="alice"))
    b = add(store, new_job("b", 2.0, user="alice", queue="q2"))
    admit(store, b)
    assert [j.id for j in store.list_jobs()] == ["a", "b", "c"]
    assert [j.id for j in store.list_jobs(user="alice")] == ["a", "b"]
    assert [j.id for j in store.list_jobs(queue="q2")] == ["b", "c"]
    assert [j.id for j in store.list_jobs(states=[JobState.PENDING])] == ["a", "c"]
    assert [j.id for j in store.list_jobs(states=[])] == []
    assert [j.id for j in store.list_jobs(limit=1, offset=1)] == ["b"]


def test_list_jobs_sorts_newest_first_and_by_any_key(store: Store) -> None:
    add(store, new_job("c", 3.0, user="bob", priority=5))
    add(store, new_job("a", 1.0, user="carol"))
    add(store, new_job("b", 2.0, user="alice", priority=5))
    assert [j.id for j in store.list_jobs(sort="-submitted")] == ["c", "b", "a"]
    assert [j.id for j in store.list_jobs(sort="-submitted", limit=2, offset=1)] == ["b", "a"]
    assert [j.id for j in store.list_jobs(sort="user")] == ["b", "c", "a"]
    # Ties (priority 5) go by submission time, in the sort's direction.
    assert [j.id for j in store.list_jobs(sort="-priority")] == ["c", "b", "a"]
    assert [j.id for j in store.list_jobs(sort="priority")] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="sort must be one of"):
        store.list_jobs(sort="age")


def test_list_jobs_by_name_and_since(store: Store) -> None:
    add(store, new_job("a", 1.0, name="train-q2"))
    add(store, new_job("b", 2.0, name="Train-Q2"))
    add(store, new_job("c", 3.0, name="eval_1"))
    add(store, new_job("d", 4.0, name="evalx1"))
    assert [j.id for j in store.list_jobs(name="train-q2")] == ["a", "b"]
    assert [j.id for j in store.list_jobs(name="train")] == []  # the whole name, not a part
    assert [j.id for j in store.list_jobs(name="*q2")] == ["a", "b"]
    assert [j.id for j in store.list_jobs(name="eval_*")] == ["c"]  # _ is no wildcard
    assert [j.id for j in store.list_jobs(name="e*1")] == ["c", "d"]
    assert [j.id for j in store.list_jobs(since=2.0)] == ["b", "c", "d"]
    assert [j.id for j in store.list_jobs(since=2.5, name="*1")] == ["c", "d"]


def test_progress_save_keeps_state_and_events(store: Store) -> None:
    job = admit(store, add(store, new_job("a", 1.0)))
    saved = store.save(replace(job, iterations_done=42.5), expected_version=job.version)
    assert store.get("a").iterations_done == 42.5
    assert saved.version == job.version + 1
    assert len(store.events("a")) == 2


def test_the_time_of_the_last_replan_round_trips(store: Store) -> None:
    """``plan_changed_at`` (set by the cycle when it applies a re-plan) survives every store,
    through an insert and through a save."""
    add(store, replace(new_job("b", 1.0), plan_changed_at=0.5))
    assert store.get("b").plan_changed_at == 0.5
    job = admit(store, add(store, new_job("a", 1.0)))
    assert store.get("a").plan_changed_at is None
    replanned = replace(job, plan=SPBPlan((0, 0), 4), plan_changed_at=12.25)
    saved = store.save(replanned, expected_version=job.version)
    back = store.get("a")
    assert back == saved
    assert back.plan_changed_at == 12.25 and back.plan == SPBPlan((0, 0), 4)


def test_a_resize_moves_a_running_job_to_running_with_its_new_size_and_batch(
    store: Store,
) -> None:
    """A resize is RUNNING -> RUNNING: the transition guard of every store lets it through, and
    the new placement, plan and per-worker batch survive (``worker_batch`` is stored)."""
    job = admit(store, add(store, new_job("a", 1.0, workers=2, batch_size=32)))
    running, event = transition(job, JobState.RUNNING, reason="up", at=11.0, actor="executor")
    job = store.save(running, expected_version=job.version, event=event)
    assert job.worker_batch is None
    resized, event = transition(
        job,
        JobState.RUNNING,
        reason="grown into free GPUs",
        at=20.0,
        actor="scheduler",
        placement=((0, 0), (0, 1), (0, 2), (0, 3)),
        plan=SPBPlan((0, 0, 0, 0), 4),
        worker_batch=16,
    )
    saved = store.save(resized, expected_version=job.version, event=event)
    back = store.get("a")
    assert back == saved
    assert back.worker_batch == 16 and len(back.placement) == 4
    assert back.attained_gpu_seconds == pytest.approx(2 * 9.0)  # counted at the old size
    assert [e.to_state for e in store.events("a")][-2:] == [JobState.RUNNING, JobState.RUNNING]


# -- SQL-only guarantees ---------------------------------------------------------------
@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request: pytest.FixtureRequest) -> Iterator[SqlStore]:
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
        url = request.getfixturevalue("postgres_url")
    else:
        url = request.getfixturevalue("sqlite_url")
    engine = make_engine(url)
    yield SqlStore(engine)
    engine.dispose()


def test_allocations_follow_the_placement(sql_store: SqlStore) -> None:
    job = admit(sql_store, add(sql_store, new_job("a", 1.0)))
    query = text("SELECT rank, node, gpu FROM allocations WHERE job_id = 'a' ORDER BY rank")
    with sql_store.engine.connect() as conn:
        assert [tuple(r) for r in conn.execute(query)] == [(0, 0, 0), (1, 0, 1)]
    moved, event = transition(job, JobState.PREEMPTED, reason="room", at=11.0, actor="s")
    sql_store.save(moved, expected_version=job.version, event=event)
    with sql_store.engine.connect() as conn:
        assert list(conn.execute(query)) == []


def test_the_database_refuses_an_unknown_state(sql_store: SqlStore) -> None:
    add(sql_store, new_job("a", 1.0))
    with pytest.raises(IntegrityError, match=r"(?i)check"), sql_store.engine.begin() as conn:
        conn.execute(text("UPDATE jobs SET state = 'LIMBO' WHERE id = 'a'"))
    assert sql_store.get("a").state == JobState.PENDING


def test_a_stale_epoch_cannot_write(sql_store: SqlStore) -> None:
    job = add(sql_store, new_job("a", 1.0))
    with sql_store.engine.begin() as conn:
        conn.execute(text("UPDATE scheduler_leader SET epoch = 2 WHERE id = 1"))
    leader, stale = sql_store.with_epoch(2), sql_store.with_epoch(1)
    with pytest.raises(StaleEpochError, match="epoch 1 is stale"):
        admit(stale, job)
    assert sql_store.get("a").state == JobState.PENDING
    admitted = admit(leader, job)
    assert admitted.state == JobState.ADMITTED
    with sql_store.engine.connect() as conn:
        epochs = list(conn.execute(text("SELECT epoch FROM job_events ORDER BY id")).scalars())
    assert epochs == [None, 2]


def _rows_of(sql_store: SqlStore, job_id: str) -> tuple[int, ...]:
    """How many rows ``jobs``, ``job_events`` and ``job_log_lines`` hold for ``job_id``."""
    key_of = {"jobs": "id", "job_events": "job_id", "job_log_lines": "job_id"}
    with sql_store.engine.connect() as conn:
        return tuple(
            conn.execute(
                text(f"SELECT count(*) FROM {table} WHERE {key} = :job_id"), {"job_id": job_id}
            ).scalar_one()
            for table, key in key_of.items()
        )


def test_a_submission_writes_job_event_and_log_line_together(sql_store: SqlStore) -> None:
    """On Postgres a submission is one statement; a duplicate adds no orphan event or line."""
    add(sql_store, new_job("a", 1.0, user="alice"))
    assert _rows_of(sql_store, "a") == (1, 1, 1)
    with sql_store.engine.connect() as conn:
        line = conn.execute(text("SELECT line FROM job_log_lines WHERE job_id = 'a'")).scalar_one()
    assert line == "(new) -> PENDING: submitted [test]"
    assert sql_store.events("a") == [submitted_event(new_job("a", 1.0), "test")]
    with pytest.raises(ConflictError):
        add(sql_store, new_job("a", 2.0))
    assert _rows_of(sql_store, "a") == (1, 1, 1)


def test_a_failing_then_callback_rolls_the_submission_back(sql_store: SqlStore) -> None:
    job = new_job("b", 1.0)

    def then(conn: object) -> None:
        raise RuntimeError("idempotency record refused")

    with pytest.raises(RuntimeError, match="refused"):
        sql_store.add(job, submitted_event(job, "test"), then=then)
    assert _rows_of(sql_store, "b") == (0, 0, 0)
    ran: list[bool] = []
    sql_store.add(job, submitted_event(job, "test"), then=lambda conn: ran.append(True))
    assert ran == [True]
    assert _rows_of(sql_store, "b") == (1, 1, 1)


@pytest.mark.parametrize(
    "plan",
    [
        SPBPlan((0, 1), 4),
        PipelinePlan(6, ((1, 4), (5, 6)), micro_batches=4, replicas=1, schedule="2bw"),
        HybridPlan.suffix(6, 2, 5, "row"),
    ],
    ids=["spb", "pipeline", "hybrid"],
)
def test_every_plan_kind_round_trips_through_the_plan_column(store: Store, plan: Plan) -> None:
    job = add(store, new_job("a", 1.0, model="vgg16_32_fc"))
    moved, event = transition(
        job,
        JobState.ADMITTED,
        reason="fits",
        at=2.0,
        actor="scheduler",
        placement=((0, 0), (0, 1)),
        plan=plan,
        attempt=1,
    )
    store.save(moved, expected_version=job.version, event=event)
    back = store.get("a").plan
    assert back == plan
    assert back is not None and back.kind == plan.kind
    assert back.describe() == plan.describe()
