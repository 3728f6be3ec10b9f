"""Alembic environment: runs on the connection ``api.migrate`` hands over, or on
``JIGSAW_DATABASE_URL`` when invoked as ``alembic -c alembic.ini ...`` from the repo root."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from api.db import make_engine
from api.models import Base
from api.settings import Settings

target_metadata = Base.metadata


def run_on(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER constraints; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        run_on(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url") or Settings().resolved_database_url
    engine = make_engine(url)
    try:
        with engine.connect() as fresh:
            run_on(fresh)
            fresh.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run against a database")
run_online()
