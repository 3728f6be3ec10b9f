"""Shared fixtures: databases (SQLite and Postgres) and real control-plane server processes.

Postgres: ``JIGSAW_TEST_DATABASE_URL`` names a server. Each test session migrates one template
database of its own (``jigsaw_t_<pid>_<random>``); every test that asks for ``postgres_url``
gets a fresh clone of it, and all of them are dropped at the end. When the variable is set but
the server is unreachable, the fixtures FAIL; when it is unset, Postgres tests skip.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[1]
PG_ENV = "JIGSAW_TEST_DATABASE_URL"


# -- parallel runs -----------------------------------------------------------------------
@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``make test`` (``-n 2 --dist loadgroup``) every test that starts a real Ray runs
    on one worker, one after another: two Ray instances on two cores starve each other's
    heartbeats, and the package's shared local Ray (tests/runtime/conftest.py) is started once.
    The other worker takes everything else."""
    for item in items:
        if item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.xdist_group("ray"))


# -- databases --------------------------------------------------------------------------
def _libpq(url: str) -> str:
    """psycopg's conninfo for a SQLAlchemy URL (drops the ``+psycopg`` driver part)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class PostgresDatabases:
    """Creates uniquely named databases on the test server and drops them at the end."""

    def __init__(self, server_url: str) -> None:
        import psycopg

        self._psycopg = psycopg
        self.server_url = server_url
        self.prefix = f"jigsaw_t_{os.getpid()}_{secrets.token_hex(3)}"
        self._created: list[str] = []
        self._template: str | None = None

    def _admin(self) -> object:
        return self._psycopg.connect(_libpq(self.server_url), autocommit=True, connect_timeout=5)

    def url_for(self, name: str) -> str:
        return make_url(self.server_url).set(database=name).render_as_string(hide_password=False)

    def create(self, *, migrated: bool = True) -> str:
        name = f"{self.prefix}_{len(self._created)}"
        template = self._migrated_template() if migrated else None
        clause = f" TEMPLATE {template}" if template else ""
        with self._admin() as conn:  # type: ignore[attr-defined]
            conn.execute(f"CREATE DATABASE {name}{clause}")
        self._created.append(name)
        return self.url_for(name)

    def _migrated_template(self) -> str:
        if self._template is None:
            from api.db import make_engine
            from api.migrate import upgrade_to_head

            name = f"{self.prefix}_template"
            with self._admin() as conn:  # type: ignore[attr-defined]
                conn.execute(f"CREATE DATABASE {name}")
            self._created.append(name)
            engine = make_engine(self.url_for(name))
            try:
                upgrade_to_head(engine)
            finally:
                engine.dispose()
            self._template = name
        return self._template

    def drop_all(self) -> None:
        with self._admin() as conn:  # type: ignore[attr-defined]
            for name in reversed(self._created):
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def postgres_databases() -> Iterator[PostgresDatabases]:
    server_url = os.environ.get(PG_ENV)
    if not server_url:
        pytest.skip(f"{PG_ENV} is not set")
    databases = PostgresDatabases(server_url)
    # Set but unreachable must fail loudly, not skip: connect now and let the error escape.
    with databases._admin():  # type: ignore[attr-defined]
        pass
    yield databases
    databases.drop_all()


@pytest.fixture(scope="session")
def _postgres_session_url(postgres_databases: PostgresDatabases) -> str:
    return postgres_databases.create()


@pytest.fixture
def postgres_url(_postgres_session_url: str) -> str:
    """This session's Postgres database, migrated to head and emptied for this test.

    (Emptying is ~100x faster than creating and dropping a database per test; tests that need
    a database of their own, such as the migration tests, call ``postgres_databases.create``.)
    """
    import psycopg

    from api.models import Base

    tables = ", ".join(table.name for table in Base.metadata.sorted_tables)
    with psycopg.connect(_libpq(_postgres_session_url), autocommit=True) as conn:
        conn.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
        conn.execute(
            "INSERT INTO scheduler_leader (id, epoch, round, last_decisions) VALUES (1, 0, 0, '[]')"
        )
    return _postgres_session_url


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from api.db import make_engine
    from api.migrate import upgrade_to_head

    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    engine = make_engine(f"sqlite:///{path}")
    try:
        upgrade_to_head(engine)
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        engine.dispose()
    return path


@pytest.fixture
def sqlite_url(tmp_path: Path, _sqlite_template: Path) -> str:
    """A fresh SQLite database file, migrated to head (a copy of this session's template)."""
    path = tmp_path / "jigsaw.db"
    shutil.copyfile(_sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> str:
    """Both backends: the same test runs on SQLite and on Postgres."""
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
        return str(request.getfixturevalue("postgres_url"))
    return str(request.getfixturevalue("sqlite_url"))


# -- real server processes --------------------------------------------------------------
def processes_in_session(session: int) -> list[str]:
    """Processes still alive in ``session`` (started with ``start_new_session=True``, whose
    id is the leader's pid), as 'pid name': what a command left behind. Linux (/proc)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) == session and fields[0] != "Z":
            alive.append(f"{entry.name} {name}")
    return alive


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    """A control plane started with ``python -m api``. Unpacks as ``(url, admin_token, env)``."""

    url: str
    admin_token: str
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    log_path: Path
    extra: dict[str, str] = field(default_factory=dict)

    def __iter__(self) -> Iterator[object]:
        return iter((self.url, self.admin_token, self.env))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        self.process.wait(timeout=30)

    def restart(self) -> ServerProcess:
        """SIGKILL the process (if alive) and start it again on the same port and database."""
        self.kill(signal.SIGKILL)
        self.process = _launch(self.env, self.log_path, self.admin_token).process
        return self


def _launch(env: dict[str, str], log_path: Path, admin_token: str | None) -> ServerProcess:
    port = int(env["JIGSAW_PORT"])
    url = f"http://127.0.0.1:{port}"
    log = log_path.open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "api"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    log.close()
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log_path.read_text()}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"server not ready within 60 s:\n{log_path.read_text()}")
        time.sleep(0.1)
    if admin_token is None:
        config = Path(env["XDG_CONFIG_HOME"]) / "jigsaw" / "config.toml"
        admin_token = str(tomllib.loads(config.read_text())["token"])
    return ServerProcess(url, admin_token, env, process, log_path)


StartServer = Callable[..., ServerProcess]


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    """Start real servers: ``start_server(database_url=None, **JIGSAW_settings)``.

    Without ``database_url`` the server runs the embedded default (SQLite under a temporary
    data dir) and its admin token is read from the config file it writes; with a URL a random
    admin token is passed in ``JIGSAW_ADMIN_TOKEN``.
    """
    started: list[ServerProcess] = []

    def start(database_url: str | None = None, **settings: object) -> ServerProcess:
        index = len(started)
        home = tmp_path / f"server{index}"
        home.mkdir()
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("JIGSAW_") or key == PG_ENV
        }
        env.update(
            {
                "PYTHONPATH": str(REPO),
                "XDG_CONFIG_HOME": str(home / "config"),
                "XDG_DATA_HOME": str(home / "data"),
                "JIGSAW_DATA_DIR": str(home / "data"),
                "JIGSAW_PORT": str(free_port()),
                "JIGSAW_ROUND_SECONDS": "0.2",
                "JIGSAW_RETRY_BACKOFF_S": "0.5",
            }
        )
        admin_token = None
        if database_url is not None:
            admin_token = "test-admin-" + secrets.token_urlsafe(24)
            env["JIGSAW_DATABASE_URL"] = database_url
            env["JIGSAW_ADMIN_TOKEN"] = admin_token
        env.update({f"JIGSAW_{key.upper()}": str(value) for key, value in settings.items()})
        server = _launch(env, home / "server.log", admin_token)
        started.append(server)
        return server

    yield start
    for server in started:
        if server.process.poll() is None:
            server.process.send_signal(signal.SIGTERM)
            try:
                server.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.process.kill()
                server.process.wait()


@pytest.fixture
def server(start_server: StartServer) -> ServerProcess:
    """A real server on the embedded default (SQLite), yielding ``(url, admin_token, env)``."""
    return start_server()
