"""Engines for Postgres (production) and SQLite (embedded), and waiting for the database."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

log = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 30_000
IMMEDIATE = "sqlite_immediate"
"""Execution option: start this SQLite transaction with ``BEGIN IMMEDIATE`` (takes the write
lock up front, so a read-then-write transaction never fails to upgrade its lock)."""


class DatabaseUnavailableError(RuntimeError):
    """The database did not answer within the start-up grace period."""


def make_engine(url: str, *, pool_size: int = 20) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    # No pool_pre_ping: it costs a round trip per checkout (measurable in bench/). After a
    # database restart SQLAlchemy invalidates the whole pool on the first disconnect error,
    # so one request fails and the rest reconnect.
    return create_engine(url, pool_size=pool_size, max_overflow=pool_size, pool_recycle=1800)


def writer(engine: Engine) -> Engine:
    """The same engine, but SQLite transactions take the write lock at BEGIN."""
    return engine.execution_options(**{IMMEDIATE: True})


def autocommit(engine: Engine) -> Engine:
    """The same engine for reads and for writes that are one statement. On Postgres its
    connections run in autocommit: a read is one round trip, not BEGIN, SELECT, ROLLBACK.
    Under Postgres's default READ COMMITTED every statement takes its own snapshot anyway, so
    no read sees less consistency. SQLite keeps its explicit ``BEGIN`` (a local call, no round
    trip), so code that needs atomicity across statements must still use :func:`writer`."""
    if is_sqlite(engine):
        return engine
    return engine.execution_options(isolation_level="AUTOCOMMIT")


def single_statement_writer(engine: Engine) -> Engine:
    """For a write that is one statement, used as ``with engine.begin()``: in autocommit on
    Postgres (1 round trip, not BEGIN, statement, COMMIT); ``BEGIN IMMEDIATE`` on SQLite."""
    return writer(engine) if is_sqlite(engine) else autocommit(engine)


def _sqlite_engine(url: str) -> Engine:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"check_same_thread": False}, pool_size=20)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # pysqlite's own BEGIN handling is turned off so the "begin" hook below controls it.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        immediate = connection.get_execution_options().get(IMMEDIATE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def wait_for_database(engine: Engine, *, timeout_s: float = 60.0) -> None:
    """Block until ``SELECT 1`` succeeds (a container's Postgres may still be starting)."""
    deadline = time.monotonic() + timeout_s
    delay = 0.2
    while True:
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
            return
        except OperationalError as error:
            if time.monotonic() >= deadline:
                raise DatabaseUnavailableError(
                    f"database {engine.url.render_as_string(hide_password=True)} did not answer "
                    f"within {timeout_s:.0f} s: {error.orig}"
                ) from None
            log.warning("waiting for the database: %s", error.orig)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
