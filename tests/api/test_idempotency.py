"""Idempotent submission: replays, mismatches, in-flight duplicates, expiry, concurrency."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import text

from api.idempotency import Claim, IdempotencyKeys, Replay, request_hash
from api.schemas.jobs import JobCreate
from tests.api.conftest import ApiClient

SPEC = {"name": "once", "model": "mlp", "workers": 1, "iterations": 5}


def post(api: ApiClient, key: str, body: dict[str, object] = SPEC, who: str = "alice"):
    headers = {**api.headers(who), "Idempotency-Key": key}
    return api.client.post("/api/v1/jobs", json=body, headers=headers)


def test_a_retry_replays_the_first_response_byte_for_byte(any_api: ApiClient) -> None:
    first = post(any_api, "k-1")
    again = post(any_api, "k-1")
    assert first.status_code == again.status_code == 201
    assert again.content == first.content
    assert again.headers["Idempotent-Replayed"] == "true"
    assert any_api.client.get("/api/v1/jobs", headers=any_api.headers("alice")).json()["total"] == 1


def test_the_replay_is_the_first_response_even_after_the_job_moved_on(api: ApiClient) -> None:
    first = post(api, "k-1")
    api.client.post(f"/api/v1/jobs/{first.json()['id']}/cancel", headers=api.headers("alice"))
    assert post(api, "k-1").content == first.content


def test_the_same_key_with_another_body_is_422(api: ApiClient) -> None:
    post(api, "k-1")
    other = post(api, "k-1", {**SPEC, "iterations": 6})
    assert other.status_code == 422
    assert other.json()["field"] == "Idempotency-Key" and "different" in other.json()["detail"]


def test_keys_belong_to_their_user(api: ApiClient) -> None:
    mine, theirs = post(api, "shared", who="alice"), post(api, "shared", who="bob")
    assert mine.status_code == theirs.status_code == 201
    assert mine.json()["id"] != theirs.json()["id"]


def test_an_invalid_spec_does_not_burn_the_key(api: ApiClient) -> None:
    assert post(api, "k-1", {**SPEC, "workers": 0}).status_code == 422
    assert post(api, "k-1").status_code == 201


def test_a_duplicate_while_the_first_is_in_flight_is_409(api: ApiClient) -> None:
    keys = IdempotencyKeys(api.state.engine, ttl_s=86400)
    claim = keys.claim("alice", "k-busy", request_hash(JobCreate.model_validate(SPEC).model_dump()))
    assert isinstance(claim, Claim)
    response = post(api, "k-busy")
    assert response.status_code == 409 and "in progress" in response.json()["detail"]


def test_an_abandoned_claim_is_taken_over(api: ApiClient) -> None:
    keys = IdempotencyKeys(api.state.engine, ttl_s=86400, abandon_after_s=0.0)
    digest = request_hash({"a": 1})
    first = keys.claim("alice", "k", digest)
    time.sleep(0.01)
    second = keys.claim("alice", "k", digest)
    assert isinstance(first, Claim) and isinstance(second, Claim)
    assert first.row_id == second.row_id


def test_keys_are_kept_a_day_then_purged(api: ApiClient) -> None:
    post(api, "old")
    keys = IdempotencyKeys(api.state.engine, ttl_s=86400)
    assert keys.purge(now=time.time() + 23 * 3600) == 0
    assert isinstance(
        keys.claim("alice", "old", request_hash(JobCreate.model_validate(SPEC).model_dump())),
        Replay,
    )
    assert keys.purge(now=time.time() + 25 * 3600) == 1
    with pytest.raises(ValueError, match="greater than or equal to 86400"):
        type(api.state.settings)(idempotency_ttl_s=3600)


def test_an_expired_key_is_a_new_request(api: ApiClient) -> None:
    first = post(api, "k-1")
    with api.state.engine.begin() as conn:
        conn.execute(text("UPDATE idempotency_keys SET created_at = created_at - 90000"))
    second = post(api, "k-1")
    assert second.status_code == 201 and second.json()["id"] != first.json()["id"]


@pytest.mark.postgres
def test_concurrent_duplicates_create_exactly_one_job(postgres_url: str, tmp_path: object) -> None:
    from tests.api.conftest import make_api

    api = make_api(postgres_url, tmp_path)
    results: list[tuple[int, bytes]] = []
    barrier = threading.Barrier(8)

    def submit() -> None:
        barrier.wait()
        for _ in range(20):
            response = post(api, "race")
            if response.status_code != 409:
                results.append((response.status_code, response.content))
                return
            time.sleep(0.02)

    with api.client:
        threads = [threading.Thread(target=submit) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        listed = api.client.get("/api/v1/jobs", headers=api.headers("alice")).json()
    api.state.engine.dispose()
    assert listed["total"] == 1
    assert len(results) == 8 and {status for status, _ in results} == {201}
    assert len({body for _, body in results}) == 1
