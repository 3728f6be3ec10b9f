"""The job routes through the real app and a real database: happy paths and bad input."""

from __future__ import annotations

import json

import pytest

from tests.api.conftest import ApiClient


def test_submit_returns_the_job_as_the_contract_describes(api: ApiClient) -> None:
    job = api.submit(name="digits", model="digits_cnn", workers=4, iterations=300, spb="staircase")
    assert job["state"] == "PENDING" and job["user"] == "alice" and job["queue"] == "default"
    assert job["spec"]["spb"] == "staircase" and job["spec"]["user"] == "alice"  # type: ignore[index]
    assert job["progress"] == 0.0 and job["plan"] == [] and job["placement"] == []
    assert str(job["created_at"]).endswith("Z") and job["started_at"] is None
    expected = {
        "id", "name", "user", "queue", "state", "priority", "spec", "iterations",
        "iterations_done", "progress", "plan", "placement", "attempt", "preemptions",
        "failures", "reason", "version", "created_at", "started_at", "finished_at",
        "last_loss", "preempted_by", "plan_kind", "num_blocks", "eta", "plan_detail",
        "plan_types", "current_workers", "worker_batch", "global_batch", "waiting",
        "iterations_per_s", "remaining_s", "resizing",
    }  # fmt: skip
    assert set(job) == expected
    fetched = api.client.get(f"/api/v1/jobs/{job['id']}", headers=api.headers("alice")).json()
    # Only GET says where a waiting job stands in the queue (a submission is not queued yet).
    assert job["waiting"] is None and fetched.pop("waiting")["position"] == 1
    assert fetched == {key: value for key, value in job.items() if key != "waiting"}


def test_list_filters_by_state_queue_and_pages(any_api: ApiClient) -> None:
    a = any_api.submit(name="a")
    any_api.submit(name="b", queue="fast")
    any_api.submit(name="c")
    any_api.client.post(f"/api/v1/jobs/{a['id']}/cancel", headers=any_api.headers("alice"))
    get = any_api.client.get
    page = get("/api/v1/jobs?limit=2&offset=1", headers=any_api.headers("alice")).json()
    assert [j["name"] for j in page["items"]] == ["b", "a"]  # newest first
    assert (page["total"], page["limit"], page["offset"]) == (3, 2, 1)
    pending = get("/api/v1/jobs?state=PENDING", headers=any_api.headers("alice")).json()
    assert [j["name"] for j in pending["items"]] == ["c", "b"]
    both = get(
        "/api/v1/jobs?state=PENDING&state=CANCELLED", headers=any_api.headers("alice")
    ).json()
    assert both["total"] == 3
    fast = get("/api/v1/jobs?queue=fast", headers=any_api.headers("alice")).json()
    assert [j["name"] for j in fast["items"]] == ["b"]


def test_users_see_only_their_own_jobs_and_admins_see_all(api: ApiClient) -> None:
    mine = api.submit("alice", name="mine")
    api.submit("bob", name="theirs")
    alice = api.client.get("/api/v1/jobs", headers=api.headers("alice")).json()
    assert [j["name"] for j in alice["items"]] == ["mine"]
    admin = api.client.get("/api/v1/jobs", headers=api.headers("admin")).json()
    assert admin["total"] == 2
    by_user = api.client.get("/api/v1/jobs?user=bob", headers=api.headers("admin")).json()
    assert [j["name"] for j in by_user["items"]] == ["theirs"]
    assert api.client.get("/api/v1/jobs?user=bob", headers=api.headers("alice")).status_code == 403
    hidden = api.client.get(f"/api/v1/jobs/{mine['id']}", headers=api.headers("bob"))
    assert hidden.status_code == 404
    cancel = api.client.post(f"/api/v1/jobs/{mine['id']}/cancel", headers=api.headers("bob"))
    assert cancel.status_code == 404
    assert api.client.get(f"/api/v1/jobs/{mine['id']}", headers=api.headers("admin")).is_success


def test_cancel_then_cancel_again_is_409_with_the_state(api: ApiClient) -> None:
    job = api.submit()
    first = api.client.post(f"/api/v1/jobs/{job['id']}/cancel", headers=api.headers("alice"))
    assert first.status_code == 200 and first.json()["state"] == "CANCELLED"
    assert first.json()["finished_at"] is not None
    again = api.client.post(f"/api/v1/jobs/{job['id']}/cancel", headers=api.headers("alice"))
    assert again.status_code == 409
    assert again.json()["state"] == "CANCELLED" and "already finished" in again.json()["detail"]
    events = api.client.get(f"/api/v1/jobs/{job['id']}/events", headers=api.headers("alice"))
    assert [(e["from_state"], e["to_state"], e["actor"]) for e in events.json()["items"]] == [
        (None, "PENDING", "alice"),
        ("PENDING", "CANCELLED", "alice"),
    ]


def test_unknown_job_is_404_everywhere(api: ApiClient) -> None:
    for suffix in ("", "/events", "/progress", "/logs"):
        response = api.client.get(f"/api/v1/jobs/j-nope{suffix}", headers=api.headers("alice"))
        assert response.status_code == 404, suffix
        assert "no job with id 'j-nope'" in response.json()["detail"]
    cancel = api.client.post("/api/v1/jobs/j-nope/cancel", headers=api.headers("alice"))
    assert cancel.status_code == 404


BASE = {"name": "x", "model": "mlp", "workers": 1, "iterations": 1}


@pytest.mark.parametrize(
    ("changes", "field", "phrase"),
    [
        ({"name": None}, "name", "required"),
        ({"workers": 0}, "workers", "greater than or equal to 1"),
        ({"workers": "4"}, "workers", "integer"),
        ({"gpus": 2}, "gpus", "unknown"),
        ({"user": "eve"}, "user", "unknown"),
        ({"spb": "zigzag"}, "spb", "unknown plan"),
        ({"learning_rate": -1}, "learning_rate", "greater than 0"),
        ({"name": "x\u0000y"}, "name", "control"),
    ],
)
def test_invalid_specs_are_422_naming_the_field(
    api: ApiClient, changes: dict[str, object], field: str, phrase: str
) -> None:
    body = {k: v for k, v in {**BASE, **changes}.items() if v is not None}
    response = api.client.post("/api/v1/jobs", json=body, headers=api.headers("alice"))
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field
    assert phrase in response.json()["detail"]
    assert api.client.get("/api/v1/jobs", headers=api.headers("alice")).json()["total"] == 0


def test_malformed_json_is_422_with_a_readable_message(api: ApiClient) -> None:
    response = api.client.post(
        "/api/v1/jobs",
        content=b'{"name": "x", ',
        headers={**api.headers("alice"), "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert response.json()["detail"].startswith("the request body is not valid JSON")


def test_oversized_body_is_413_and_nothing_is_stored(api: ApiClient) -> None:
    limit = api.state.settings.max_body_bytes
    big = json.dumps({"name": "x" * (limit + 10), "model": "mlp", "workers": 1, "iterations": 1})
    response = api.client.post(
        "/api/v1/jobs",
        content=big.encode(),
        headers={**api.headers("alice"), "Content-Type": "application/json"},
    )
    assert response.status_code == 413
    assert "JIGSAW_MAX_BODY_BYTES" in response.json()["detail"]

    def chunks() -> object:
        yield big.encode()

    streamed = api.client.post(
        "/api/v1/jobs",
        content=chunks(),  # type: ignore[arg-type]
        headers={**api.headers("alice"), "Content-Type": "application/json"},
    )
    assert streamed.status_code == 413
    assert api.client.get("/api/v1/jobs", headers=api.headers("alice")).json()["total"] == 0


def test_validate_resolves_the_plan_and_predicts_without_storing(api: ApiClient) -> None:
    body = {"name": "x", "model": "digits_cnn", "workers": 4, "iterations": 10, "spb": "staircase"}
    response = api.client.post("/api/v1/jobs:validate", json=body, headers=api.headers("alice"))
    assert response.status_code == 200, response.text
    result = response.json()
    blocks = result["num_blocks"]
    assert result["plan"] == [(r * blocks) // 4 for r in range(4)]
    assert result["spec"]["user"] == "alice"
    prediction = result["prediction"]
    assert prediction["iteration_time_s"] > 0
    assert len(prediction["per_worker_memory_bytes"]) == 4
    # Partial workers backpropagate less: the deepest uses less memory than the full one.
    assert prediction["per_worker_memory_bytes"][3] < prediction["per_worker_memory_bytes"][0]
    assert "oracle" in prediction["source"]
    assert api.client.get("/api/v1/jobs", headers=api.headers("alice")).json()["total"] == 0


def test_validate_of_a_model_without_profile_says_so(api: ApiClient) -> None:
    body = {"name": "x", "model": "mypkg.models:build", "workers": 2, "iterations": 10}
    result = api.client.post("/api/v1/jobs:validate", json=body, headers=api.headers("alice"))
    assert result.status_code == 200
    assert result.json()["prediction"]["iteration_time_s"] is None
    assert "no oracle profile" in result.json()["prediction"]["source"]


def test_unknown_route_and_wrong_method_have_readable_details(api: ApiClient) -> None:
    missing = api.client.get("/api/v2/jobs", headers=api.headers("alice"))
    assert missing.status_code == 404 and "/api/v1" in missing.json()["detail"]
    wrong = api.client.delete("/api/v1/jobs", headers=api.headers("alice"))
    assert wrong.status_code == 405 and "accepts only GET, POST" in wrong.json()["detail"]
    assert wrong.headers["Allow"] == "GET, POST"
