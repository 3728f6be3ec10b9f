"""The store seam (issue 12, part 7): routes read and write through store methods and never
run SQL themselves, so no module under ``api/routers/`` or ``api/dashboard/`` imports
SQLAlchemy (its exception types aside) or the table definitions. Checked on the AST. The
store methods the routes moved to are exercised by real requests on SQLite and Postgres."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest
from sqlalchemy import insert, update

from api.models import scheduler_leader, utilization_samples
from tests.api.conftest import ApiClient

API = Path(__file__).resolve().parents[2] / "api"
ROUTE_FILES = sorted([*(API / "routers").glob("*.py"), *(API / "dashboard").glob("*.py")])
ALLOWED = {"sqlalchemy.exc"}
"""Catching the database's errors is not running SQL."""


def sql_imports(path: Path) -> set[str]:
    """Modules imported by ``path`` that would let it run SQL: SQLAlchemy, ``api.models``
    (the tables) and ``api.db`` (engines and connections)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            if name in ALLOWED:
                continue
            if name.split(".")[0] == "sqlalchemy" or name in ("api.models", "api.db"):
                found.add(name)
    return found


def test_there_are_routes_to_check() -> None:
    assert len(ROUTE_FILES) >= 6


@pytest.mark.parametrize("path", ROUTE_FILES, ids=lambda p: str(p.relative_to(API)))
def test_a_route_module_runs_no_sql(path: Path) -> None:
    assert not sql_imports(path), f"{path} runs SQL itself; add a store method"


def test_checker_catches_sql_in_a_route(tmp_path: Path) -> None:
    sample = tmp_path / "route.py"
    sample.write_text(
        "from sqlalchemy import select\nimport sqlalchemy.orm\nfrom api.models import jobs\n"
        "from sqlalchemy.exc import SQLAlchemyError\nfrom api.deps import StateDep\n"
    )
    assert sql_imports(sample) == {"sqlalchemy", "sqlalchemy.orm", "api.models"}


def test_utilization_reads_the_samples_through_the_store(any_api: ApiClient) -> None:
    now = time.time()
    with any_api.state.engine.begin() as conn:
        conn.execute(
            insert(utilization_samples),
            [
                {"at": now - 7200, "busy_gpus": 1, "total_gpus": 4},  # outside the last hour
                {"at": now - 60, "busy_gpus": 3, "total_gpus": 4},
                {"at": now - 30, "busy_gpus": 0, "total_gpus": 0},
            ],
        )
    headers = any_api.headers("alice")
    items = any_api.client.get("/api/v1/cluster/utilization", headers=headers).json()["items"]
    assert [(i["busy_gpus"], i["total_gpus"], i["utilization"]) for i in items] == [
        (3, 4, 0.75),
        (0, 0, 0.0),
    ]
    everything = any_api.client.get(
        "/api/v1/cluster/utilization?since=2000-01-01T00:00:00Z", headers=headers
    ).json()["items"]
    assert [i["busy_gpus"] for i in everything] == [1, 3, 0]


def test_readyz_reads_the_leader_heartbeat_through_the_store(any_api: ApiClient) -> None:
    """No scheduler runs in these fixtures: not ready until a fresh heartbeat is recorded."""
    first = any_api.client.get("/readyz")
    assert first.status_code == 503 and first.json()["checks"]["scheduler"] != "ok"
    with any_api.state.engine.begin() as conn:  # the migrations made the single row
        assert conn.execute(update(scheduler_leader).values(heartbeat_at=time.time())).rowcount
    ready = any_api.client.get("/readyz")
    assert ready.status_code == 200, ready.json()
    assert ready.json()["checks"] == {"database": "ok", "migrations": "ok", "scheduler": "ok"}
