"""One scheduler leads at a time, and every write it makes carries its epoch.

- Postgres: ``pg_try_advisory_lock`` on a dedicated connection, held for the leader's
  lifetime (the lock dies with the connection, so a crashed leader frees it at once).
- SQLite: an exclusive ``flock`` on ``<database>.scheduler.lock``; a second scheduler process
  gets :class:`SchedulerAlreadyRunningError` with a readable message.

Winning leadership increments ``scheduler_leader.epoch``. The winner's store fences every
UPDATE with ``(SELECT epoch FROM scheduler_leader) = :epoch``, so a leader that lost its lock
without noticing (a long GC pause, a cut connection) cannot overwrite the new leader's work.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import time
from pathlib import Path
from typing import IO, Protocol

from sqlalchemy import Connection, Engine, create_engine, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from api.db import writer
from api.models import scheduler_leader

log = logging.getLogger(__name__)

LEADER_LOCK_KEY = 0x4A49_4753_4C45_4144  # "JIGSLEAD"


class SchedulerAlreadyRunningError(RuntimeError):
    """Another scheduler process holds the SQLite database's scheduler lock."""


class Leadership(Protocol):
    epoch: int | None

    def try_acquire(self) -> int | None:
        """Become leader if nobody is; returns the new epoch, or ``None`` (stay standby)."""
        ...

    def still_leader(self) -> bool: ...

    def release(self) -> None: ...


def holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def bump_epoch(engine: Engine, holder: str) -> int:
    """Start a new epoch: from now on, writes fenced with an older one are refused."""
    now = time.time()
    with writer(engine).begin() as conn:
        epoch: int = conn.execute(
            update(scheduler_leader)
            .where(scheduler_leader.c.id == 1)
            .values(
                epoch=scheduler_leader.c.epoch + 1,
                holder=holder,
                acquired_at=now,
                heartbeat_at=now,
            )
            .returning(scheduler_leader.c.epoch)
        ).scalar_one()
    return int(epoch)


def leadership_for(engine: Engine, holder: str | None = None) -> Leadership:
    name = holder or holder_name()
    if engine.dialect.name == "postgresql":
        return PostgresLeadership(engine, name)
    if engine.dialect.name == "sqlite":
        return SqliteLeadership(engine, name)
    raise RuntimeError(f"no leader election for {engine.dialect.name}")


class PostgresLeadership:
    def __init__(self, engine: Engine, holder: str) -> None:
        self._engine = engine
        self._holder = holder
        # A connection of its own, outside the pool: closing it must really end the session.
        self._lock_engine = create_engine(engine.url, poolclass=NullPool)
        self._connection: Connection | None = None
        self.epoch: int | None = None

    def try_acquire(self) -> int | None:
        connection = self._lock_engine.connect()
        try:
            got: bool = connection.execute(
                text("SELECT pg_try_advisory_lock(:key)"), {"key": LEADER_LOCK_KEY}
            ).scalar_one()
            connection.commit()
        except SQLAlchemyError:
            connection.close()
            raise
        if not got:
            connection.close()
            return None
        self._connection = connection
        self.epoch = bump_epoch(self._engine, self._holder)
        log.info("scheduler %s leads with epoch %s", self._holder, self.epoch)
        return self.epoch

    def still_leader(self) -> bool:
        if self._connection is None:
            return False
        try:
            held: int = self._connection.execute(
                text(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                    "AND pid = pg_backend_pid() AND granted "
                    "AND ((classid::bigint << 32) | objid::bigint) = :key"
                ),
                {"key": LEADER_LOCK_KEY},
            ).scalar_one()
            self._connection.commit()
        except SQLAlchemyError as error:
            log.warning("scheduler lost its lock connection: %s", error)
            return False
        return bool(held)

    def release(self) -> None:
        if self._connection is not None:
            try:
                self._connection.execute(
                    text("SELECT pg_advisory_unlock(:key)"), {"key": LEADER_LOCK_KEY}
                )
                self._connection.commit()
            except SQLAlchemyError:
                pass  # the lock goes with the connection anyway
            finally:
                self._connection.close()
                self._connection = None
        self.epoch = None
        self._lock_engine.dispose()

    def backend_pid(self) -> int | None:
        """The lock connection's server process id (tests cut it to simulate a partition)."""
        if self._connection is None:
            return None
        pid: int = self._connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
        self._connection.commit()
        return int(pid)


class SqliteLeadership:
    def __init__(self, engine: Engine, holder: str) -> None:
        self._engine = engine
        self._holder = holder
        database = make_url(str(engine.url)).database or ""
        self.lock_path = Path(f"{database}.scheduler.lock")
        self._handle: IO[str] | None = None
        self.epoch: int | None = None

    def try_acquire(self) -> int | None:
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.lock_path.open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "unknown"
            handle.close()
            raise SchedulerAlreadyRunningError(
                f"another scheduler ({owner}) already runs against {self.lock_path.stem}; "
                "SQLite supports one scheduler process: stop the other one, or use Postgres "
                "(JIGSAW_DATABASE_URL) to run a standby"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(self._holder)
        handle.flush()
        self._handle = handle
        self.epoch = bump_epoch(self._engine, self._holder)
        log.info("scheduler %s leads with epoch %s", self._holder, self.epoch)
        return self.epoch

    def still_leader(self) -> bool:
        if self._handle is None or self.epoch is None:
            return False
        with self._engine.connect() as conn:
            return conn.execute(select(scheduler_leader.c.epoch)).scalar() == self.epoch

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
        self.epoch = None
