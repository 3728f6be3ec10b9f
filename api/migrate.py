"""Alembic, configured in code so an installed package migrates without an ini file.

The service calls :func:`upgrade_to_head` at start (never ``create_all``): the migrations in
``migrations/versions`` are the only source of the schema.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

from api.db import writer

# Serializes migrations of several processes starting at once against one Postgres.
MIGRATION_LOCK_KEY = 0x4A49_4753_4D49_47  # "JIGSMIG"


def migrations_dir() -> Path:
    """``migrations/`` sits next to the ``api`` package both in the repo and in an installed
    wheel (both are top-level packages). Found by location, not by the generic import name
    ``migrations``, which another directory on ``sys.path`` could shadow."""
    beside = Path(__file__).resolve().parents[1] / "migrations"
    if (beside / "env.py").is_file():
        return beside
    return Path(str(resources.files("migrations")))


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@cache
def head_revision() -> str | None:
    """The newest migration (cached: the scripts do not change under a running process)."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def is_at_head(engine: Engine) -> bool:
    return current_revision(engine) == head_revision()


def upgrade_to_head(engine: Engine) -> None:
    _run(engine, "upgrade", "head")


def downgrade_to(engine: Engine, revision: str = "base") -> None:
    _run(engine, "downgrade", revision)


def _run(engine: Engine, action: str, revision: str) -> None:
    with writer(engine).begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
            )
        config = alembic_config(connection)
        if action == "upgrade":
            command.upgrade(config, revision)
        else:
            command.downgrade(config, revision)
