"""A table of bad requests, each refused at the door: its status, the field the error names,
and nothing stored. Runs on SQLite and on Postgres (one app per backend for the whole table).

The app has 4 GPUs (``JIGSAW_GPUS``) and a queue ``small`` with a 2-GPU quota; ``digits_cnn``
has K = 4 blocks.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from api.models import idempotency_keys, job_events
from api.schemas.jobs import JobCreate
from tests.api.conftest import ApiClient, make_api

BASE: dict[str, Any] = {"name": "j", "model": "mlp", "workers": 1, "iterations": 10}
DIGITS: dict[str, Any] = {**BASE, "model": "digits_cnn", "workers": 2}
JSON = {"Content-Type": "application/json"}


@dataclasses.dataclass(frozen=True)
class Bad:
    case: str
    status: int
    field: str | None
    body: dict[str, Any] | list[Any] | None = None
    raw: bytes | None = None
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    method: str = "POST"
    path: str = "/api/v1/jobs"
    auth: str | None = "alice"
    """Whose token (``None``: send the ``headers`` as they are, no token added)."""


def spec(**changes: Any) -> dict[str, Any]:
    body = {**BASE, **changes}
    return {k: v for k, v in body.items() if v is not _DROP}


def digits(**changes: Any) -> dict[str, Any]:
    return {**DIGITS, **changes}


_DROP = object()

CASES = [
    # -- model: a zoo model, or package.module:function ------------------------------------
    Bad("unknown zoo model", 422, "model", spec(model="no_such_model")),
    Bad("path as model", 422, "model", spec(model="../../etc/passwd")),
    Bad("model in wrong case", 422, "model", spec(model="MLP")),
    Bad("entrypoint without function", 422, "model", spec(model="pkg.mod:")),
    Bad("entrypoint without module", 422, "model", spec(model=":build")),
    Bad("entrypoint with empty part", 422, "model", spec(model="pkg..mod:build")),
    Bad("entrypoint part starts with digit", 422, "model", spec(model="1pkg.mod:build")),
    Bad("entrypoint with two colons", 422, "model", spec(model="pkg.mod:a:b")),
    Bad("entrypoint with a space", 422, "model", spec(model="pkg mod:build")),
    Bad("entrypoint with a dash", 422, "model", spec(model="my-pkg.mod:build")),
    Bad("entrypoint with a slash", 422, "model", spec(model="pkg/mod:build")),
    Bad("empty model", 422, "model", spec(model="")),
    Bad("model too long", 422, "model", spec(model="m" * 201)),
    Bad("model a number", 422, "model", spec(model=5)),
    Bad("model null", 422, "model", spec(model=None)),
    Bad("model missing", 422, "model", spec(model=_DROP)),
    # -- spb against the model's K (digits_cnn: 4 blocks) ------------------------------------
    Bad("depth beyond K", 422, "spb", digits(spb="0,9")),
    Bad("depth equal to K", 422, "spb", digits(spb="0,4")),
    Bad("depth above a million", 422, "spb", digits(spb="0,2000000")),
    Bad("listed depth above a million", 422, "spb", digits(spb=[0, 2_000_000])),
    Bad("uniform beyond K", 422, "spb", digits(spb="uniform:50")),
    Bad("uniform equal to K", 422, "spb", digits(spb="uniform:4")),
    Bad("uniform without k", 422, "spb", digits(spb="uniform:x")),
    Bad("uniform negative", 422, "spb", digits(spb="uniform:-1")),
    Bad("no worker at depth 0", 422, "spb", digits(spb="1,2")),
    Bad("more depths than workers", 422, "spb", digits(spb="0,1,2")),
    Bad("fewer depths than workers", 422, "spb", digits(spb=[0])),
    Bad("empty depth list", 422, "spb", digits(spb=[])),
    Bad("unknown plan name", 422, "spb", digits(spb="bogus")),
    Bad("spb a number", 422, "spb", digits(spb=5)),
    Bad("spb a bool", 422, "spb", digits(spb=True)),
    Bad("spb an object", 422, "spb", digits(spb={})),
    Bad("spb a fraction", 422, "spb", digits(spb=1.5)),
    Bad("spb mixed list", 422, "spb", digits(spb=[0, "a"])),
    Bad("spb negative in list", 422, "spb", digits(spb=[-1, 0])),
    Bad("spb 8193 characters", 422, "spb", digits(spb="0" * 8193)),
    Bad("spb with NUL", 422, "spb", digits(spb="0\x00")),
    # -- workers: the cluster (4 GPUs) and the queue's quota ---------------------------------
    Bad("gang larger than the cluster", 422, "workers", spec(workers=5)),
    Bad("gang larger than the queue quota", 422, "workers", spec(workers=3, queue="small")),
    Bad("zero workers", 422, "workers", spec(workers=0)),
    Bad("negative workers", 422, "workers", spec(workers=-1)),
    Bad("workers above the maximum", 422, "workers", spec(workers=1025)),
    Bad("workers a string", 422, "workers", spec(workers="4")),
    Bad("workers a fraction", 422, "workers", spec(workers=1.5)),
    Bad("workers a bool", 422, "workers", spec(workers=True)),
    Bad("workers null", 422, "workers", spec(workers=None)),
    Bad("workers missing", 422, "workers", spec(workers=_DROP)),
    Bad(
        "workers with 5000 digits",
        422,
        "workers",
        raw=b'{"name": "j", "model": "mlp", "iterations": 10, "workers": ' + b"9" * 5000 + b"}",
        headers=JSON,
    ),
    # -- the other fields --------------------------------------------------------------------
    Bad("zero iterations", 422, "iterations", spec(iterations=0)),
    Bad("too many iterations", 422, "iterations", spec(iterations=10**9 + 1)),
    Bad("iterations a string", 422, "iterations", spec(iterations="10")),
    Bad(
        "iterations 1e400",
        422,
        "iterations",
        raw=b'{"name": "j", "model": "mlp", "workers": 1, "iterations": 1e400}',
        headers=JSON,
    ),
    Bad("empty name", 422, "name", spec(name="")),
    Bad("name too long", 422, "name", spec(name="n" * 129)),
    Bad("name with a newline", 422, "name", spec(name="a\nb")),
    Bad("name of spaces", 422, "name", spec(name="   ")),
    Bad("name of no-break spaces", 422, "name", spec(name="\u00a0\u3000")),
    Bad("name a number", 422, "name", spec(name=5)),
    Bad("name missing", 422, "name", spec(name=_DROP)),
    Bad("priority too high", 422, "priority", spec(priority=1001)),
    Bad("priority a word", 422, "priority", spec(priority="high")),
    Bad("zero batch size", 422, "batch_size", spec(batch_size=0)),
    Bad("zero learning rate", 422, "learning_rate", spec(learning_rate=0)),
    Bad("negative learning rate", 422, "learning_rate", spec(learning_rate=-1)),
    Bad("learning rate a word", 422, "learning_rate", spec(learning_rate="fast")),
    Bad("learning rate too large", 422, "learning_rate", spec(learning_rate=1e7)),
    Bad("negative seed", 422, "seed", spec(seed=-1)),
    Bad("seed above 2^53", 422, "seed", spec(seed=2**53 + 1)),
    Bad("empty queue", 422, "queue", spec(queue="")),
    Bad("queue with a tab", 422, "queue", spec(queue="q\tx")),
    Bad("user in the body", 422, "user", spec(user="bob")),
    Bad("unknown field", 422, "gpus", spec(gpus=2)),
    # -- the body itself -----------------------------------------------------------------------
    Bad("not JSON", 422, None, raw=b'{"name": ', headers=JSON),
    Bad("a JSON list", 422, None, body=[BASE]),
    Bad("an empty body", 422, None, raw=b"", headers=JSON),
    Bad(
        "UTF-16 JSON",
        400,
        None,
        raw='{"name": "j", "model": "mlp", "workers": 1, "iterations": 10}'.encode("utf-16"),
        headers=JSON,
    ),
    Bad("Latin-1 JSON", 400, None, raw='{"name": "é"}'.encode("latin-1"), headers=JSON),
    Bad("50,000-deep JSON", 400, None, raw=b"[" * 50_000 + b"]" * 50_000, headers=JSON),
    Bad(
        "33-deep JSON in a field",
        400,
        None,
        raw=b'{"name": "j", "model": "mlp", "workers": 1, "iterations": 10, "spb": '
        + b"[" * 32
        + b"]" * 32
        + b"}",
        headers=JSON,
    ),
    # A repeated key is refused, not resolved (json.loads alone keeps the last one, so each of
    # these bodies would otherwise be a valid job, or a token for another user).
    Bad(
        "key given twice",
        422,
        "workers",
        raw=b'{"name": "j", "model": "mlp", "workers": 9, "iterations": 10, "workers": 1}',
        headers=JSON,
    ),
    Bad(
        "key given twice with one value",
        422,
        "name",
        raw=b'{"name": "j", "model": "mlp", "workers": 1, "iterations": 10, "name": "j"}',
        headers=JSON,
    ),
    Bad(
        "key given twice in a nested object",
        422,
        "spb.1.k",
        raw=b'{"name": "j", "model": "digits_cnn", "workers": 2, "iterations": 10, '
        b'"spb": [0, {"k": 1, "k": 2}]}',
        headers=JSON,
    ),
    Bad(
        "key given twice, the first holding a repeat too",
        422,
        "spb",
        raw=b'{"name": "j", "model": "digits_cnn", "workers": 2, "iterations": 10, '
        b'"spb": {"k": 1, "k": 2}, "spb": "0,1"}',
        headers=JSON,
    ),
    Bad(
        "validate: key given twice",
        422,
        "model",
        raw=b'{"name": "j", "model": "nope", "workers": 1, "iterations": 10, "model": "mlp"}',
        headers=JSON,
        path="/api/v1/jobs:validate",
    ),
    Bad(
        "token: user given twice",
        422,
        "user",
        raw=b'{"name": "t", "user": "alice", "scopes": ["user"], "user": "root"}',
        headers=JSON,
        path="/api/v1/tokens",
        auth="admin",
    ),
    Bad("plain text", 415, None, raw=b"name=j", headers={"Content-Type": "text/plain"}),
    Bad(
        "a form",
        415,
        None,
        raw=b"name=j&model=mlp",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    ),
    # -- headers -------------------------------------------------------------------------------
    Bad("key with a space", 422, "Idempotency-Key", spec(), headers={"Idempotency-Key": "a b"}),
    Bad("key too long", 422, "Idempotency-Key", spec(), headers={"Idempotency-Key": "k" * 256}),
    Bad("no token", 401, None, spec(), auth=None),
    Bad(
        "Bearer with two spaces",
        401,
        None,
        spec(),
        headers={"Authorization": "Bearer  x"},
        auth=None,
    ),
    Bad("Bearer without token", 401, None, spec(), headers={"Authorization": "Bearer"}, auth=None),
    Bad("Basic scheme", 401, None, spec(), headers={"Authorization": "Basic dTpw"}, auth=None),
    Bad("worker token submits", 403, None, spec(), auth="worker"),
    # -- query parameters ----------------------------------------------------------------------
    Bad("unknown state", 422, "state", method="GET", path="/api/v1/jobs?state=BOGUS"),
    Bad(
        "second state bogus",
        422,
        "state",
        method="GET",
        path="/api/v1/jobs?state=PENDING&state=nope",
    ),
    Bad("limit zero", 422, "limit", method="GET", path="/api/v1/jobs?limit=0"),
    Bad("limit a word", 422, "limit", method="GET", path="/api/v1/jobs?limit=all"),
    Bad("negative offset", 422, "offset", method="GET", path="/api/v1/jobs?offset=-1"),
    Bad("unknown parameter", 422, "stat", method="GET", path="/api/v1/jobs?stat=RUNNING"),
    Bad("repeated limit", 422, "limit", method="GET", path="/api/v1/jobs?limit=1&limit=2"),
    Bad(
        "since not a time",
        422,
        "since",
        method="GET",
        path="/api/v1/cluster/utilization?since=yesterday",
    ),
    Bad("logs tail zero", 422, "tail", method="GET", path="/api/v1/jobs/j-1/logs?tail=0"),
    Bad("logs since a word", 422, "since", method="GET", path="/api/v1/jobs/j-1/logs?since=x"),
    Bad("models for zero workers", 422, "workers", method="GET", path="/api/v1/models?workers=0"),
    Bad(
        "models batch a word",
        422,
        "batch_size",
        method="GET",
        path="/api/v1/models?batch_size=big",
    ),
    # -- jobs:validate refuses what submit refuses (one code path) ------------------------------
    Bad("validate: unknown model", 422, "model", spec(model="nope"), path="/api/v1/jobs:validate"),
    Bad("validate: depth beyond K", 422, "spb", digits(spb="0,9"), path="/api/v1/jobs:validate"),
    Bad("validate: gang too big", 422, "workers", spec(workers=5), path="/api/v1/jobs:validate"),
    Bad(
        "validate: over quota",
        422,
        "workers",
        spec(workers=3, queue="small"),
        path="/api/v1/jobs:validate",
    ),
    Bad("validate: bad entrypoint", 422, "model", spec(model="a.b"), path="/api/v1/jobs:validate"),
]


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 60
    assert len({case.case for case in CASES}) == len(CASES), "case names must be unique"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def bad_api(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ApiClient]:
    """One app per backend for the whole table: no case stores anything, so they can share."""
    home = tmp_path_factory.mktemp(f"bad-{request.param}")
    if request.param == "postgres":
        request.applymarker(pytest.mark.postgres)
        url = request.getfixturevalue("postgres_databases").create()
    else:
        path = Path(home) / "jigsaw.db"
        shutil.copyfile(request.getfixturevalue("_sqlite_template"), path)
        url = f"sqlite:///{path}"
    made = make_api(url, home, gpus=4, queue_quotas={"small": 2})
    with made.client:
        yield made
    made.state.engine.dispose()


@pytest.mark.parametrize("bad", CASES, ids=lambda bad: bad.case)
def test_bad_request_is_refused_naming_the_field(bad_api: ApiClient, bad: Bad) -> None:
    headers = dict(bad_api.headers(bad.auth)) if bad.auth else {}
    headers.update(bad.headers)
    if bad.raw is not None:
        response = bad_api.client.request(bad.method, bad.path, content=bad.raw, headers=headers)
    elif bad.body is not None:
        response = bad_api.client.request(bad.method, bad.path, json=bad.body, headers=headers)
    else:
        response = bad_api.client.request(bad.method, bad.path, headers=headers)

    assert response.status_code == bad.status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert isinstance(body["detail"], str) and body["detail"]
    assert "function-after" not in body["detail"] and "partial(" not in body["detail"]
    assert body.get("field") == bad.field, body
    if bad.field is not None:
        assert bad.field.lower() in body["detail"].lower(), "the message names the field too"
    assert _stored(bad_api) == (0, 0, 0), "a refused request stored something"


def _stored(api: ApiClient) -> tuple[int, int, int]:
    with api.state.engine.connect() as conn:
        keys = conn.execute(select(func.count()).select_from(idempotency_keys)).scalar_one()
        events = conn.execute(select(func.count()).select_from(job_events)).scalar_one()
    return api.state.store.count_jobs(), int(keys), int(events)


@pytest.mark.parametrize(
    ("spb", "says"),
    [
        (5, "field 'spb': must be a list of integers or a string, got a number"),
        (True, "must be a list of integers or a string, got a boolean"),
        ([0, "a"], "field 'spb': item 1: Input should be a valid integer"),
        ("0" * 8193, "must be at most 8192 characters, got 8193"),
    ],
)
def test_a_union_field_says_what_it_takes(bad_api: ApiClient, spb: object, says: str) -> None:
    response = bad_api.client.post(
        "/api/v1/jobs", json=digits(spb=spb), headers=bad_api.headers("alice")
    )
    assert response.status_code == 422
    assert says in response.json()["detail"]


@pytest.mark.parametrize("depth", [33, 50_000])
def test_a_body_nested_too_deeply_says_so_with_the_limit(bad_api: ApiClient, depth: int) -> None:
    """It is UTF-8 JSON: the refusal says what is wrong with it (issue 25)."""
    body = b"[" * depth + b"]" * depth
    response = bad_api.client.post(
        "/api/v1/jobs", content=body, headers={**bad_api.headers("alice"), **JSON}
    )
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "more than 32 levels deep" in detail and "UTF-8" not in detail, detail


def test_the_schema_says_a_blank_name_is_refused() -> None:
    """The OpenAPI pattern of a job's name refuses what the core refuses (only whitespace, as
    ``str.strip`` counts it), so schemathesis' schema-valid names are names the API takes."""
    pattern = JobCreate.model_json_schema()["properties"]["name"]["pattern"]
    for name in ("j", " j ", "\ufeff", "digits-demo"):
        assert re.match(pattern, name) and name.strip(), name
    for name in ("\u00a0", "   ", "\u3000\u2009", "\x85"):
        assert not re.match(pattern, name) and not name.strip(), name
