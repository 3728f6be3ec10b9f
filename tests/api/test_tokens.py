"""Listing and revoking API tokens, on SQLite and Postgres."""

from __future__ import annotations

import threading

from sqlalchemy import Engine

from api.state import PrincipalCache
from api.tokens import LastAdminTokenError, create_token, list_tokens, revoke_token
from tests.api.conftest import ApiClient


def tokens_of(api: ApiClient, **params: object) -> list[dict[str, object]]:
    response = api.client.get("/api/v1/tokens", params=params, headers=api.headers("admin"))
    assert response.status_code == 200, response.text
    items: list[dict[str, object]] = response.json()["items"]
    return items


def id_of(api: ApiClient, name: str) -> int:
    return int(next(t["id"] for t in tokens_of(api) if t["name"] == name))  # type: ignore[call-overload]


def revoke(api: ApiClient, token_id: int, who: str = "admin") -> tuple[int, dict[str, object]]:
    response = api.client.post(f"/api/v1/tokens/{token_id}/revoke", headers=api.headers(who))
    return response.status_code, response.json()


def test_listing_shows_every_token_but_never_a_secret(any_api: ApiClient) -> None:
    listed = tokens_of(any_api)
    assert [(t["name"], t["user"], t["scopes"]) for t in listed] == [
        ("a", "root", ["admin"]),
        ("b", "alice", ["user"]),
        ("c", "bob", ["user"]),
        ("d", "node-1", ["worker"]),
    ]
    assert all(t["revoked_at"] is None and str(t["created_at"]).endswith("Z") for t in listed)
    text = any_api.client.get("/api/v1/tokens", headers=any_api.headers("admin")).text
    assert all(secret not in text for secret in any_api.tokens.values())
    assert "hash" not in text


def test_a_revoked_token_stops_working_at_once_and_stays_listed_as_revoked(
    any_api: ApiClient,
) -> None:
    alice = any_api.headers("alice")
    assert any_api.client.get("/api/v1/jobs", headers=alice).status_code == 200  # now cached
    status, body = revoke(any_api, id_of(any_api, "b"))
    assert status == 200 and body["name"] == "b" and body["revoked_at"] is not None
    refused = any_api.client.get("/api/v1/jobs", headers=alice)
    assert refused.status_code == 401
    assert [t["name"] for t in tokens_of(any_api)] == ["a", "c", "d"]
    everyone = tokens_of(any_api, include_revoked="true")
    assert [(t["name"], t["revoked_at"] is not None) for t in everyone] == [
        ("a", False),
        ("b", True),
        ("c", False),
        ("d", False),
    ]
    again_status, again = revoke(any_api, int(body["id"]))  # type: ignore[call-overload]
    assert again_status == 200 and again["revoked_at"] == body["revoked_at"]


def test_revoking_an_unknown_token_says_where_the_ids_are(any_api: ApiClient) -> None:
    status, body = revoke(any_api, 4242)
    assert status == 404
    assert body["detail"] == "no token has id 4242; `jigsaw-cli token list` shows the ids"
    response = any_api.client.post("/api/v1/tokens/0/revoke", headers=any_api.headers("admin"))
    assert response.status_code == 422


def test_the_last_admin_token_cannot_be_revoked(any_api: ApiClient) -> None:
    first = id_of(any_api, "a")
    status, body = revoke(any_api, first)
    assert status == 409 and "last active admin token" in str(body["detail"])
    assert any_api.client.get("/api/v1/tokens", headers=any_api.headers("admin")).status_code == 200

    second = create_token(any_api.state.engine, name="e", user="ops", scopes=["admin", "user"])
    any_api.tokens["ops"] = second.token
    assert revoke(any_api, first)[0] == 200
    assert any_api.client.get("/api/v1/tokens", headers=any_api.headers("admin")).status_code == 401
    status, body = revoke(any_api, second.id, who="ops")
    assert status == 409 and "create another admin token" in str(body["detail"])


def test_two_concurrent_revocations_cannot_remove_both_of_the_last_admins(
    any_api: ApiClient,
) -> None:
    engine = any_api.state.engine
    survivor = id_of(any_api, "a")
    for round_number in range(5):
        pair = [
            create_token(engine, name=f"r{round_number}-{i}", user="ops", scopes=["admin"]).id
            for i in range(2)
        ]
        revoke_token(engine, survivor)  # now exactly the pair are active admin tokens
        barrier = threading.Barrier(2)
        outcomes: list[str] = []
        threads = [
            threading.Thread(target=race_to_revoke, args=(engine, token_id, barrier, outcomes))
            for token_id in pair
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(outcomes) == ["refused", "revoked"], f"round {round_number}: {outcomes}"
        active_admins = [t.id for t in list_tokens(engine) if t.is_active_admin]
        assert len(active_admins) == 1 and active_admins[0] in pair
        survivor = active_admins[0]


def race_to_revoke(
    engine: Engine, token_id: int, barrier: threading.Barrier, outcomes: list[str]
) -> None:
    barrier.wait()
    try:
        revoke_token(engine, token_id)
        outcomes.append("revoked")
    except LastAdminTokenError:
        outcomes.append("refused")


def test_another_server_refuses_a_revoked_token_once_its_cache_entry_expires(
    any_api: ApiClient,
) -> None:
    now = [1000.0]  # the replica's monotonic clock, moved by hand: no race with a slow database
    other_replica = PrincipalCache(any_api.state.engine, ttl_s=5.0, monotonic=lambda: now[0])
    token = any_api.tokens["bob"]
    assert other_replica.get(token) is not None
    assert revoke(any_api, id_of(any_api, "c"))[0] == 200
    now[0] += 4.9
    assert other_replica.cached(token) is not None  # within its TTL it still trusts the entry
    now[0] += 0.2
    assert other_replica.get(token) is None
