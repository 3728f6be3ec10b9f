"""``parallelism`` through the real app (SQLite): the default per model kind, the oracle's
prediction for every plan type in the job's JSON and the dry run, the choice under a
per-worker memory limit (``JIGSAW_WORKER_MEMORY_GIB``), and bad input refused naming the
field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jigsaw.model.domain import JobSpec
from jigsaw.model.hardware import preset
from jigsaw.model.numerics import GIB
from jigsaw.planning.planner import Planner
from tests.api.conftest import ApiClient, make_api

VGG: dict[str, Any] = {"name": "big", "model": "vgg16_32_fc", "workers": 2, "iterations": 10}


def needs() -> dict[str, int]:
    """Each plan type's predicted per-worker memory for VGG at 2 workers, batch 32, v100."""
    choice = Planner(preset("v100")).plan_choice(JobSpec(**VGG))
    assert choice is not None
    return {a.kind: a.prediction.max_model_bytes for a in choice.alternatives}


@pytest.fixture
def tight_api(sqlite_url: str, tmp_path: Path) -> Iterator[ApiClient]:
    """An app whose per-worker limit is below data parallelism's need but above the
    smallest alternative's."""
    need = needs()
    smallest = min(v for k, v in need.items() if k != "data")
    assert smallest < need["data"], need
    limit_gib = (smallest + need["data"]) / 2 / GIB
    made = make_api(sqlite_url, tmp_path, worker_memory_gib=limit_gib)
    with made.client:
        yield made
    made.state.engine.dispose()


def post(api: ApiClient, path: str, body: dict[str, Any]) -> Any:
    return api.client.post(f"/api/v1/{path}", json=body, headers=api.headers("alice"))


def test_zoo_models_default_to_auto_and_entrypoints_to_data(api: ApiClient) -> None:
    job = api.submit(**VGG)
    assert job["spec"]["parallelism"] == "auto"  # type: ignore[index]
    types = job["plan_types"]
    assert types["chosen"] == "data"  # type: ignore[index]
    kinds = [a["kind"] for a in types["alternatives"]]  # type: ignore[index]
    assert kinds[0] == "data" and "pipeline" in kinds and "hybrid" in kinds
    for alternative in types["alternatives"]:  # type: ignore[index]
        assert alternative["iteration_time_s"] > 0 and alternative["max_worker_memory_bytes"] > 0
        assert alternative["fits"] is True
    described = api.client.get(f"/api/v1/jobs/{job['id']}", headers=api.headers("alice")).json()
    assert described["plan_types"] == types
    entry = api.submit(name="own", model="mypkg.models:build", workers=2, iterations=5)
    assert entry["spec"]["parallelism"] == "data"  # type: ignore[index]
    assert entry["plan_types"] is None


def test_a_model_over_the_memory_limit_gets_a_pipeline_or_hybrid_plan(
    tight_api: ApiClient,
) -> None:
    response = post(tight_api, "jobs:validate", VGG)
    assert response.status_code == 200, response.text
    result = response.json()
    types = result["plan_types"]
    data = next(a for a in types["alternatives"] if a["kind"] == "data")
    assert data["fits"] is False
    assert types["chosen"] in ("pipeline", "hybrid")
    assert result["plan_kind"] == types["chosen"] and result["plan"] == []
    assert result["plan_detail"]["kind"] == types["chosen"]
    assert len(result["prediction"]["per_worker_memory_bytes"]) == 2
    # The limit covers the model's memory (the workspace is outside it, as on the workers).
    chosen = next(a for a in types["alternatives"] if a["chosen"])
    assert chosen["max_worker_memory_bytes"] <= types["memory_limit_bytes"]
    assert "over" in types["reason"]
    job = post(tight_api, "jobs", VGG)
    assert job.status_code == 201, job.text
    assert job.json()["plan_types"]["chosen"] == types["chosen"]


def test_nothing_fitting_is_refused_naming_the_limit(sqlite_url: str, tmp_path: Path) -> None:
    limit_gib = min(needs().values()) / 2 / GIB
    made = make_api(sqlite_url, tmp_path, worker_memory_gib=limit_gib)
    with made.client:
        response = post(made, "jobs", VGG)
    made.state.engine.dispose()
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["field"] == "parallelism"
    assert "JIGSAW_WORKER_MEMORY_GIB" in body["detail"]
    assert f"{limit_gib:.2f} GiB" in body["detail"]


@pytest.mark.parametrize(
    "extra,field,says",
    [
        ({"parallelism": "tensor"}, "parallelism", "parallelism"),
        ({"parallelism": "pipeline", "spb": "staircase"}, "spb", "auto or none"),
        ({"parallelism": "hybrid", "model": "mypkg.models:build"}, "parallelism", "entrypoint"),
        ({"parallelism": "pipeline", "workers": 1}, "parallelism", "stage count"),
    ],
    ids=["unknown", "spb-on-pipeline", "entrypoint", "one-worker-pipeline"],
)
def test_bad_parallelism_is_refused_naming_the_field(
    api: ApiClient, extra: dict[str, Any], field: str, says: str
) -> None:
    for path in ("jobs", "jobs:validate"):
        response = post(api, path, {**VGG, **extra})
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["field"] == field, body
        assert says in body["detail"], body
    assert api.state.store.count_jobs() == 0


def test_openapi_lists_the_parallelism_choices(api: ApiClient) -> None:
    schema = api.client.get("/openapi.json").json()
    field = schema["components"]["schemas"]["JobCreate"]["properties"]["parallelism"]
    choices = next(option["enum"] for option in field["anyOf"] if "enum" in option)
    assert choices == ["auto", "data", "pipeline", "hybrid"]
