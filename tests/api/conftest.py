"""In-process app fixtures: the real app over a real (SQLite or Postgres) database, with a
token per role. No scheduler runs unless a test starts one."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

with warnings.catch_warnings():
    # Starlette wants the `httpx2` package for its TestClient; httpx is what we have and it
    # works. Only this import's deprecation notice is silenced.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

from api.app import build_state, create_app
from api.settings import Settings
from api.state import AppState
from api.tokens import create_token


@dataclass
class ApiClient:
    client: TestClient
    state: AppState
    tokens: dict[str, str]

    def headers(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def submit(self, who: str = "alice", **spec: object) -> dict[str, object]:
        body: dict[str, object] = {"name": "job", "model": "mlp", "workers": 1, "iterations": 10}
        body.update(spec)
        response = self.client.post("/api/v1/jobs", json=body, headers=self.headers(who))
        assert response.status_code == 201, response.text
        result: dict[str, object] = response.json()
        return result


def make_api(database_url: str, tmp_path: object, **settings: object) -> ApiClient:
    config = Settings(
        database_url=database_url,
        data_dir=tmp_path,  # type: ignore[arg-type]
        config_path=f"{tmp_path}/config.toml",  # type: ignore[arg-type]
        **settings,  # type: ignore[arg-type]
    )
    state = build_state(config)
    tokens = {
        "admin": create_token(state.engine, name="a", user="root", scopes=["admin"]).token,
        "alice": create_token(state.engine, name="b", user="alice", scopes=["user"]).token,
        "bob": create_token(state.engine, name="c", user="bob", scopes=["user"]).token,
        "worker": create_token(state.engine, name="d", user="node-1", scopes=["worker"]).token,
    }
    return ApiClient(TestClient(create_app(state=state)), state, tokens)


@pytest.fixture
def api(sqlite_url: str, tmp_path: object) -> Iterator[ApiClient]:
    made = make_api(sqlite_url, tmp_path)
    with made.client:
        yield made
    made.state.engine.dispose()


@pytest.fixture
def any_api(database_url: str, tmp_path: object) -> Iterator[ApiClient]:
    """The same app on SQLite and on Postgres."""
    made = make_api(database_url, tmp_path)
    with made.client:
        yield made
    made.state.engine.dispose()
