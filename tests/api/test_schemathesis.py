"""Property-based contract test: schemathesis generates requests from our OpenAPI document;
no 5xx and no response that violates the document.

(The schema is loaded at import from an app whose SQLite database is created and migrated by
a fixture before the first request; schemathesis' lazy ``from_fixture`` does not work with
pytest 9.)
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from api.app import build_state, create_app
from api.migrate import upgrade_to_head
from api.settings import Settings
from api.tokens import create_token

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    import schemathesis
    from schemathesis.openapi.checks import RejectedPositiveData
    from schemathesis.specs.openapi.checks import positive_data_acceptance

MAX_EXAMPLES = 25
DATA_DIR = Path(tempfile.gettempdir()) / f"jigsaw-schemathesis-{id(object())}"
STATE = build_state(
    Settings(database_url=f"sqlite:///{DATA_DIR / 'jigsaw.db'}", data_dir=DATA_DIR, gpus=4)
)
# /readyz is 503 by design here (no scheduler runs); tests/api/test_end_to_end.py covers it.
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(state=STATE)).exclude(
    path="/readyz"
)


@pytest.fixture(scope="module")
def admin_headers() -> Iterator[dict[str, str]]:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    upgrade_to_head(STATE.engine)
    token = create_token(STATE.engine, name="contract", user="root", scopes=["admin"]).token
    headers = {"Authorization": f"Bearer {token}"}
    yield headers
    STATE.engine.dispose()
    shutil.rmtree(DATA_DIR, ignore_errors=True)


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,  # the same examples on every run: a failure here is reproducible
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_no_server_errors_and_responses_match_the_schema(
    case: schemathesis.Case, admin_headers: dict[str, str]
) -> None:
    # Positive-data acceptance runs, through the wrapper below: it forgives only the 422s of
    # the rules a JSON schema cannot state, each recognised by its field and its message.
    case.call_and_validate(
        headers=admin_headers,
        excluded_checks=[positive_data_acceptance],
        additional_checks=[schema_valid_request_accepted],
    )


CROSS_FIELD_RULES = {
    # the depths must match `workers` and the model's K
    "spb": ("depths but the job has", "does not fit model", "is a data-parallel plan"),
    # the per-worker memory limit is configuration; a plan type must fit the model and workers
    "parallelism": ("per-worker memory limit", "has no plan for model", "needs a zoo model"),
    # a batch so large that no plan type fits the per-worker memory limit (configuration), or
    # one iteration's global batch larger than the model's training split (its profile); a
    # fixed elastic batch every size must divide, an adaptive range holding the initial one
    "batch_size": (
        "per-worker memory limit",
        "training samples",
        "does not split evenly",
        "must lie in min_global_batch",
    ),
    # the cluster's size and the quotas are configuration, not schema; an elastic range
    # must hold the initial size
    "workers": ("can never start", "training samples", "must lie in min_workers..max_workers"),
    # elastic jobs (docs/API.md, "Checks a submission passes"): the range, the cluster, quotas
    "min_workers": ("is above max_workers",),
    "max_workers": ("more than the cluster's", "can never be given", "only data-parallel"),
    "batch_policy": ("only data-parallel",),
    # adamw runs on the data-parallel engine only, with its moments in the memory limit
    "optimizer": ("runs data parallel only", "per-worker memory limit"),
    "min_global_batch": (
        "bounds an adaptive batch",
        "batch_policy adaptive needs",
        "is above max_global_batch",
    ),
    "max_global_batch": (
        "bounds an adaptive batch",
        "batch_policy adaptive needs",
        "gives every worker the same whole number of samples",
        "training samples",
    ),
    # the same key with another body (documented as this operation's 422)
    "Idempotency-Key": ("already used with a different request body",),
}
"""The only refusals of schema-valid requests (docs/API.md, "Checks a submission passes")."""


def is_cross_field_refusal(status: int, body: object) -> bool:
    if status != 422 or not isinstance(body, dict):
        return False
    phrases = CROSS_FIELD_RULES.get(str(body.get("field")), ())
    return any(phrase in str(body.get("detail", "")) for phrase in phrases)


@schemathesis.check
def schema_valid_request_accepted(ctx: object, response: object, case: schemathesis.Case) -> None:
    """schemathesis' positive-data acceptance, except for a cross-field rule's 422."""
    try:
        positive_data_acceptance(ctx, response, case)  # type: ignore[arg-type]
    except RejectedPositiveData:
        status = response.status_code  # type: ignore[attr-defined]
        if not is_cross_field_refusal(status, response.json()):  # type: ignore[attr-defined]
            raise


def test_the_forgiven_refusals_are_only_the_cross_field_rules() -> None:
    assert is_cross_field_refusal(
        422, {"field": "spb", "detail": "plan lists 3 depths but the job has 2 workers"}
    )
    assert not is_cross_field_refusal(422, {"field": "spb", "detail": "unknown plan 'x'"})
    assert not is_cross_field_refusal(422, {"field": "model", "detail": "unknown model 'x'"})
    assert not is_cross_field_refusal(400, {"field": "workers", "detail": "can never start"})
