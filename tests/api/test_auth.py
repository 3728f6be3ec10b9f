"""Auth matrix: every route x {no token, bad token, wrong scope, right scope}."""

from __future__ import annotations

import pytest

from api.tokens import hash_token
from tests.api.conftest import ApiClient

SUBMITTER = frozenset({"user", "admin"})
READER = frozenset({"user", "admin", "worker"})
ADMIN = frozenset({"admin"})
PUBLIC = frozenset()

# Every route of the app must appear here: a new route without a rule fails the test.
ACCESS: dict[tuple[str, str], frozenset[str]] = {
    ("POST", "/api/v1/jobs"): SUBMITTER,
    ("POST", "/api/v1/jobs:validate"): SUBMITTER,
    ("GET", "/api/v1/jobs"): SUBMITTER,
    ("GET", "/api/v1/jobs/{job_id}"): SUBMITTER,
    ("POST", "/api/v1/jobs/{job_id}/cancel"): SUBMITTER,
    ("GET", "/api/v1/jobs/{job_id}/events"): SUBMITTER,
    ("GET", "/api/v1/jobs/{job_id}/progress"): SUBMITTER,
    ("GET", "/api/v1/jobs/{job_id}/logs"): SUBMITTER,
    ("GET", "/api/v1/cluster"): READER,
    ("GET", "/api/v1/cluster/nodes"): READER,
    ("GET", "/api/v1/cluster/gpus"): READER,
    ("GET", "/api/v1/cluster/packing"): READER,
    ("GET", "/api/v1/cluster/utilization"): READER,
    ("GET", "/api/v1/scheduler"): READER,
    ("GET", "/api/v1/scheduler/queue"): READER,
    ("GET", "/api/v1/models"): READER,
    ("POST", "/api/v1/tokens"): ADMIN,
    ("GET", "/api/v1/tokens"): ADMIN,
    ("POST", "/api/v1/tokens/{token_id}/revoke"): ADMIN,
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/metrics"): PUBLIC,
}
BODIES = {
    "/api/v1/jobs": {"name": "x", "model": "mlp", "workers": 1, "iterations": 5},
    "/api/v1/jobs:validate": {"name": "x", "model": "mlp", "workers": 1, "iterations": 5},
    "/api/v1/tokens": {"name": "t", "user": "carol", "scopes": ["user"]},
}
TOKEN_OF_SCOPE = {"admin": "admin", "user": "alice", "worker": "worker"}


def own_routes(api: ApiClient) -> set[tuple[str, str]]:
    """Every (method, path) the OpenAPI document lists, except the dashboard's."""
    paths = api.client.get("/openapi.json").json()["paths"]
    return {
        (method.upper(), path)
        for path, operations in paths.items()
        if not path.startswith("/dashboard")
        for method in operations
    }


def call(api: ApiClient, method: str, path: str, job_id: str, headers: dict[str, str]) -> int:
    url = path.replace("{job_id}", job_id).replace("{token_id}", "999999")
    body = BODIES.get(path)
    response = api.client.request(method, url, json=body, headers=headers)
    return response.status_code


def test_every_route_has_an_access_rule(api: ApiClient) -> None:
    assert own_routes(api) == set(ACCESS)


@pytest.mark.parametrize(("method", "path"), sorted(k for k, v in ACCESS.items() if v))
def test_protected_route_matrix(api: ApiClient, method: str, path: str) -> None:
    allowed = ACCESS[(method, path)]
    job_id = str(api.submit("alice")["id"])
    assert call(api, method, path, job_id, {}) == 401
    assert call(api, method, path, job_id, {"Authorization": "Bearer jgs_not-a-token"}) == 401
    assert call(api, method, path, job_id, {"Authorization": "Basic YWxpY2U6cHc="}) == 401
    for scope, who in TOKEN_OF_SCOPE.items():
        status = call(api, method, path, job_id, api.headers(who))
        if scope in allowed:
            assert status not in (401, 403), f"{scope} should reach {method} {path}: {status}"
        else:
            assert status == 403, f"{scope} must be refused on {method} {path}: {status}"


def test_unauthenticated_responses_say_how_to_authenticate(api: ApiClient) -> None:
    response = api.client.get("/api/v1/jobs")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert "Authorization: Bearer" in response.json()["detail"]


@pytest.mark.parametrize("path", ["/healthz", "/metrics"])
def test_probes_need_no_token(api: ApiClient, path: str) -> None:
    assert api.client.get(path).status_code == 200


def test_tokens_are_stored_only_as_hashes_and_work_once_issued(api: ApiClient) -> None:
    issued = api.client.post(
        "/api/v1/tokens", json=BODIES["/api/v1/tokens"], headers=api.headers("admin")
    )
    assert issued.status_code == 201
    token = issued.json()["token"]
    assert issued.json()["user"] == "carol" and issued.json()["scopes"] == ["user"]
    with api.state.engine.connect() as conn:
        stored = [row[0] for row in conn.exec_driver_sql("SELECT token_hash FROM api_tokens")]
    assert token not in stored and hash_token(token) in stored
    mine = api.client.post(
        "/api/v1/jobs", json=BODIES["/api/v1/jobs"], headers={"Authorization": f"Bearer {token}"}
    )
    assert mine.status_code == 201 and mine.json()["user"] == "carol"


def test_token_creation_rejects_unknown_scopes(api: ApiClient) -> None:
    response = api.client.post(
        "/api/v1/tokens",
        json={"name": "t", "user": "u", "scopes": ["root"]},
        headers=api.headers("admin"),
    )
    assert response.status_code == 422 and response.json()["field"] == "scopes.0"
