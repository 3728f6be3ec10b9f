"""``optimizer`` through the real app, on SQLite and Postgres: the default is SGD and a job that
gives nothing looks as before; ``adamw`` is stored (spec and column) and shown; bad input is a
422 naming the field and the allowed values; AdamW's second moment counts against the
per-worker memory limit at submit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text

from jigsaw.model.domain import JobSpec
from jigsaw.model.numerics import GIB
from jigsaw.planning.planner import Planner
from tests.api.conftest import ApiClient, make_api

MLP: dict[str, Any] = {"name": "o", "model": "mlp", "workers": 2, "iterations": 10}


def data_need(optimizer: str, batch_size: int) -> int:
    """Data parallelism's predicted per-worker model memory for MLP on 2 workers."""
    spec = JobSpec(**MLP, optimizer=optimizer, batch_size=batch_size)
    choice = Planner().plan_choice(spec)
    assert choice is not None
    return choice.chosen.prediction.max_model_bytes


@pytest.fixture
def api(database_url: str, tmp_path: object) -> Iterator[ApiClient]:
    """A per-worker limit that holds SGD at batch 32 and AdamW at batch 1, not AdamW at 32."""
    sgd, adamw_at_one, adamw = data_need("sgd", 32), data_need("adamw", 1), data_need("adamw", 32)
    assert sgd < adamw_at_one < adamw
    limit_gib = (adamw_at_one + adamw) / 2 / GIB
    made = make_api(database_url, tmp_path, worker_memory_gib=limit_gib)
    with made.client:
        yield made
    made.state.engine.dispose()


def post(api: ApiClient, path: str, body: dict[str, Any]) -> Any:
    return api.client.post(f"/api/v1/{path}", json=body, headers=api.headers("alice"))


def stored_column(api: ApiClient, job_id: object) -> str:
    with api.state.engine.connect() as conn:
        query = text("SELECT optimizer FROM jobs WHERE id = :id")
        return str(conn.execute(query, {"id": job_id}).scalar_one())


def test_a_job_without_an_optimizer_trains_with_sgd(api: ApiClient) -> None:
    job = api.submit(**MLP)
    assert job["spec"]["optimizer"] == "sgd"  # type: ignore[index]
    assert stored_column(api, job["id"]) == "sgd"
    assert job["plan_types"]["chosen"] == "data"  # type: ignore[index]


def test_an_adamw_job_is_stored_shown_and_runs_data_parallel(api: ApiClient) -> None:
    job = api.submit(**MLP, optimizer="adamw", batch_size=4, learning_rate=0.003)
    fetched = api.client.get(f"/api/v1/jobs/{job['id']}", headers=api.headers("alice")).json()
    assert fetched["spec"]["optimizer"] == "adamw"
    assert stored_column(api, job["id"]) == "adamw"
    types = fetched["plan_types"]
    assert types["chosen"] == "data"
    assert [a["kind"] for a in types["alternatives"]] == ["data"]  # SGD-only engines not offered
    assert "data-parallel engine only" in types["reason"]
    assert types["alternatives"][0]["max_worker_memory_bytes"] == data_need("adamw", 4)


REFUSED = [
    # (what is wrong, the body's changes, the field named, words the message must hold)
    ("unknown optimizer", {"optimizer": "adam"}, "optimizer", "'sgd' or 'adamw'"),
    ("optimizer not a string", {"optimizer": 1}, "optimizer", ""),
    ("adamw on a pipeline", {"optimizer": "adamw", "parallelism": "pipeline"}, "optimizer", "SGD"),
    ("adamw on a hybrid", {"optimizer": "adamw", "parallelism": "hybrid"}, "optimizer", "SGD"),
    ("a momentum", {"optimizer": "adamw", "momentum": 0.5}, "momentum", "unknown field"),
    (
        "adamw's moments over the memory limit",
        {"optimizer": "adamw", "batch_size": 32},
        "batch_size",
        "with optimizer adamw",
    ),
]


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_bad_optimizer_requests_are_refused_naming_the_field(
    api: ApiClient, changes: dict[str, object], field: str, words: str
) -> None:
    for path in ("jobs", "jobs:validate"):
        response = post(api, path, {**MLP, **changes})
        assert response.status_code == 422, response.text
        assert response.json()["field"] == field, response.text
        assert words in response.json()["detail"], response.text
    assert api.client.get("/api/v1/jobs", headers=api.headers("alice")).json()["total"] == 0
    # The same job with SGD fits (SGD keeps one state copy, AdamW two).
    if field == "batch_size":
        assert post(api, "jobs:validate", {**MLP, "batch_size": 32}).status_code == 200


def test_openapi_lists_the_optimizers_with_sgd_the_default(api: ApiClient) -> None:
    schema = api.client.get("/openapi.json").json()
    field = schema["components"]["schemas"]["JobCreate"]["properties"]["optimizer"]
    assert (field["enum"], field["default"]) == (["sgd", "adamw"], "sgd")


def test_the_dry_run_counts_adamws_second_moment_on_every_rank(api: ApiClient) -> None:
    """The per-rank figures of ``jobs:validate`` (the oracle's SPB costs count SGD's one
    state copy) hold AdamW's second one too: one more copy of the parameters per worker."""
    body = {**MLP, "batch_size": 4, "spb": "staircase"}
    sgd = post(api, "jobs:validate", body).json()["prediction"]["per_worker_memory_bytes"]
    adamw = post(api, "jobs:validate", {**body, "optimizer": "adamw"}).json()["prediction"]
    param_bytes = data_need("adamw", 4) - data_need("sgd", 4)
    assert param_bytes > 0
    assert [b - a for a, b in zip(sgd, adamw["per_worker_memory_bytes"], strict=True)] == [
        param_bytes
    ] * 2
