"""The migrations are the schema: they produce exactly the models, go down to nothing and
up again, on SQLite and on Postgres."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import IntegrityError

from api.db import make_engine
from api.migrate import current_revision, downgrade_to, head_revision, is_at_head, upgrade_to_head
from api.models import Base
from api.store.sql_store import SqlStore
from jigsaw.model.lifecycle import JobState
from tests.conftest import PostgresDatabases


@pytest.fixture(params=["sqlite", "postgres"])
def empty_engine(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Engine]:
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
        databases: PostgresDatabases = request.getfixturevalue("postgres_databases")
        url = databases.create(migrated=False)
    else:
        url = f"sqlite:///{tmp_path}/empty.db"
    engine = make_engine(url)
    yield engine
    engine.dispose()


def schema_diff(engine: Engine) -> list[object]:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(context, Base.metadata))


def test_upgrade_from_empty_gives_exactly_the_models(empty_engine: Engine) -> None:
    assert current_revision(empty_engine) is None
    upgrade_to_head(empty_engine)
    assert is_at_head(empty_engine)
    assert schema_diff(empty_engine) == []
    upgrade_to_head(empty_engine)  # a second start migrates nothing
    assert schema_diff(empty_engine) == []
    with empty_engine.connect() as conn:
        row = conn.execute(text("SELECT id, epoch, round FROM scheduler_leader")).one()
    assert tuple(row) == (1, 0, 0)  # the epoch guard's sub-select always finds its row


def test_downgrade_to_base_and_upgrade_again(empty_engine: Engine) -> None:
    upgrade_to_head(empty_engine)
    downgrade_to(empty_engine, "base")
    assert set(inspect(empty_engine).get_table_names()) <= {"alembic_version"}
    upgrade_to_head(empty_engine)
    assert current_revision(empty_engine) == head_revision()
    assert schema_diff(empty_engine) == []


def test_the_state_check_accepts_exactly_the_lifecycle_states(empty_engine: Engine) -> None:
    """compare_metadata does not compare CHECK constraints, so this checks the migration's
    frozen list of states against today's JobState."""
    upgrade_to_head(empty_engine)
    insert = text(
        "INSERT INTO jobs (id, name, username, queue, state, priority, spec, version, attempt, "
        "iterations, iterations_done, plan, placement, submitted_at, attained_gpu_seconds, "
        "preemptions, failures, reason, extra, updated_at) VALUES (:id, 'n', 'u', 'q', :state, "
        "0, '{}', 0, 0, 1, 0, '[]', '[]', 0, 0, 0, 0, 'r', '{}', 0)"
    )
    for state in JobState:
        with empty_engine.begin() as conn:
            conn.execute(insert, {"id": f"j-{state.value}", "state": state.value})
    with pytest.raises(IntegrityError), empty_engine.begin() as conn:
        conn.execute(insert, {"id": "j-bad", "state": "LIMBO"})


def test_jobs_before_0005_train_with_sgd_and_no_other_optimizer_is_stored(
    empty_engine: Engine,
) -> None:
    """A row written before ``jobs.optimizer`` existed reads as SGD, by its column (the server
    default) and by its spec (the key is absent); the column refuses an unknown optimizer;
    going down to 0004 drops it again."""
    upgrade_to_head(empty_engine)
    downgrade_to(empty_engine, "0004")
    assert "optimizer" not in {c["name"] for c in inspect(empty_engine).get_columns("jobs")}
    old_spec = '{"name": "n", "model": "mlp", "workers": 1, "iterations": 1}'
    insert = (
        "INSERT INTO jobs (id, name, username, queue, state, priority, spec, version, attempt, "
        "iterations, iterations_done, plan, placement, submitted_at, attained_gpu_seconds, "
        "preemptions, failures, reason, extra, updated_at{column}) VALUES (:id, 'n', 'u', 'q', "
        "'PENDING', 0, :spec, 0, 0, 1, 0, 'null', '[]', 0, 0, 0, 0, 'r', '{{}}', 0{value})"
    )
    with empty_engine.begin() as conn:
        conn.execute(text(insert.format(column="", value="")), {"id": "j-old", "spec": old_spec})
    upgrade_to_head(empty_engine)
    with empty_engine.connect() as conn:
        stored = conn.execute(text("SELECT optimizer FROM jobs WHERE id = 'j-old'")).scalar_one()
    assert stored == "sgd"
    assert SqlStore(empty_engine).get("j-old").spec.optimizer == "sgd"
    with_column = insert.format(column=", optimizer", value=", :optimizer")
    with empty_engine.begin() as conn:
        conn.execute(text(with_column), {"id": "j-adamw", "spec": old_spec, "optimizer": "adamw"})
    with pytest.raises(IntegrityError), empty_engine.begin() as conn:
        conn.execute(text(with_column), {"id": "j-bad", "spec": old_spec, "optimizer": "adam"})
    downgrade_to(empty_engine, "0004")
    assert "optimizer" not in {c["name"] for c in inspect(empty_engine).get_columns("jobs")}
