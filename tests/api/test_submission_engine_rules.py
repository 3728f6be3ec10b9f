"""A spec that validates is a spec that runs (issue 25, item 1 and its memory messages): the
submission checks ask the app's one planner every rule the engines enforce, through the real
app (SQLite), on a cluster large enough that the worker count is not what refuses the job."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jigsaw.model.numerics import GIB
from jigsaw.model.sizes import human_bytes
from tests.api.conftest import ApiClient, make_api


@pytest.fixture
def big_api(sqlite_url: str, tmp_path: Path) -> Iterator[ApiClient]:
    made = make_api(sqlite_url, tmp_path, gpus=64)
    with made.client:
        yield made
    made.state.engine.dispose()


def post(api: ApiClient, path: str, body: dict[str, Any]) -> Any:
    return api.client.post(f"/api/v1/{path}", json=body, headers=api.headers("alice"))


HYBRID_11 = {"model": "mlp", "workers": 11, "parallelism": "hybrid"}
HYBRID_64 = {"model": "digits_cnn", "workers": 64, "parallelism": "hybrid"}
HUGE_BATCH = {"model": "mlp", "workers": 2, "batch_size": 2**31 - 1}
HUGE_PIPELINE = {**HUGE_BATCH, "model": "vgg16_32_fc", "parallelism": "pipeline"}
BIG_IMAGES = {"model": "vgg16_32", "workers": 4, "batch_size": 128}
REFUSED = [
    # A hybrid shards the output-side linear layers across every worker: mlp's and
    # digits_cnn's classifier has 10 outputs (the engine failed 41 s into the run).
    (HYBRID_11, "parallelism", "out_features of 10 cannot be split across 11 workers"),
    (HYBRID_64, "parallelism", "out_features of 10 cannot be split across 64 workers"),
    # A memory refusal a smaller batch would cure names the batch, not the plan type.
    (HUGE_BATCH, "batch_size", "at batch_size 2147483647 no plan type fits the per-worker"),
    (HUGE_PIPELINE, "batch_size", "parallelism pipeline does not fit the per-worker memory"),
    # Every engine samples one iteration's global batch from the training split (the
    # profile records its size): vgg16_32 trains on 256 synthetic images.
    (BIG_IMAGES, "batch_size", "global batch 512 (4 workers x 128) exceeds the 256 training"),
]


@pytest.mark.parametrize(("fields", "field", "phrase"), REFUSED)
@pytest.mark.parametrize("path", ["jobs", "jobs:validate"])
def test_what_an_engine_would_refuse_is_refused_at_submit_naming_the_field(
    big_api: ApiClient, path: str, fields: dict[str, Any], field: str, phrase: str
) -> None:
    response = post(big_api, path, {"name": "r", "iterations": 5, **fields})
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["field"] == field, body
    assert phrase in body["detail"], body
    assert big_api.state.store.count_jobs() == 0


ACCEPTED = [
    {"model": "vgg16_32", "workers": 4, "batch_size": 64},  # 256 samples: the whole split
    {"model": "mlp", "workers": 10, "parallelism": "hybrid"},  # ten outputs, ten workers
    {"model": "mlp", "workers": 11},  # auto: no hybrid on 11 workers, data parallel runs
]


@pytest.mark.parametrize("fields", ACCEPTED)
def test_the_widest_runnable_gangs_are_still_accepted(
    big_api: ApiClient, fields: dict[str, Any]
) -> None:
    response = post(big_api, "jobs", {"name": "ok", "iterations": 5, **fields})
    assert response.status_code == 201, response.text
    chosen = response.json()["plan_types"]["chosen"]
    assert chosen == fields.get("parallelism", "data")


@pytest.mark.parametrize(
    ("limit_bytes", "shown"),
    [(100 * 1024, "100.00 KiB"), (300 * 1024, "0.29 MiB"), (1000, "0.98 KiB")],
)
def test_a_small_memory_limit_is_shown_in_units_that_show_it(
    sqlite_url: str, tmp_path: Path, limit_bytes: int, shown: str
) -> None:
    made = make_api(sqlite_url, tmp_path, worker_memory_gib=limit_bytes / GIB)
    with made.client:
        response = post(made, "jobs", {"name": "m", "model": "mlp", "workers": 2, "iterations": 5})
    made.state.engine.dispose()
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert human_bytes(limit_bytes) == shown
    assert f"per-worker memory limit of {shown}" in detail, detail
    assert "0.00 GiB" not in detail, detail
