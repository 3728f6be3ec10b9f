"""What a submission must mean (api/submission_checks.py), what it may still mean, and the
views around jobs that cannot start: the cluster-size check follows the recorded inventory,
a gang the cluster shrank below is marked unschedulable and skipped, the queue gives it no
estimate, and JIGSAW_PRIVATE_JOBS hides other users' jobs (both settings, dashboard data
included). Runs on SQLite and Postgres where a database is involved."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from api.jobs_service import INVENTORY_MAX_AGE_S
from api.scheduler.recorder import RoundRecorder
from api.store import SqlStore
from jigsaw.model.cluster import Cluster
from jigsaw.model.lifecycle import JobState
from jigsaw.policies import create_policy
from jigsaw.scheduling.clock import WallClock
from jigsaw.scheduling.cycle import SchedulingCycle
from jigsaw.simulator.rate_executor import ConstantRate, RateDrivenExecutor
from tests.api.conftest import ApiClient, make_api


def run_round(api: ApiClient, cluster: Cluster, policy: str = "fifo") -> None:
    """One real scheduling round, recorded as the leader records it."""
    with api.state.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE scheduler_leader SET epoch = 1")
    store = SqlStore(api.state.engine, epoch=1)
    recorder = RoundRecorder(api.state.engine, api.state.metrics, 1, policy)
    cycle = SchedulingCycle(
        store,
        RateDrivenExecutor(ConstantRate(10.0)),
        create_policy(policy, planner=api.state.planner),
        WallClock(),
        lambda: cluster,
        on_decision=lambda now, d: recorder.on_decision(store, now, d),
    )
    recorder.after_round(cycle.run_once(), cluster)


def post(
    api: ApiClient, path: str, body: dict[str, object], who: str = "alice"
) -> dict[str, object]:
    response = api.client.post(f"/api/v1/{path}", json=body, headers=api.headers(who))
    result: dict[str, object] = response.json()
    result["_status"] = response.status_code
    return result


# -- what still passes --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "spb", "workers"),
    [
        ("digits_cnn", "staircase", 4),
        ("digits_cnn", "uniform:3", 2),  # k = K - 1: the deepest allowed
        ("digits_cnn", [0, 3], 2),
        ("digits_cnn", "0, 3", 2),  # spaces after commas, as people type them
        ("vgg16_32", "0,4", 2),  # a 5-block model takes depth 4
        ("mlp", "auto", 1),
        ("mypkg.models:build", "0,9", 2),  # an entrypoint's K is checked at its first lease
        ("a_b.c2:_f", "none", 1),
    ],
)
def test_meaningful_submissions_are_accepted(
    any_api: ApiClient, model: str, spb: object, workers: int
) -> None:
    body = {"name": "ok", "model": model, "workers": workers, "iterations": 5, "spb": spb}
    assert post(any_api, "jobs", body)["_status"] == 201


def test_validate_takes_the_submit_path_and_reports_k(api: ApiClient) -> None:
    zoo = post(
        api,
        "jobs:validate",
        {"name": "v", "model": "digits_cnn", "workers": 2, "iterations": 5, "spb": "uniform:3"},
    )
    assert zoo["_status"] == 200 and zoo["plan"] == [0, 3] and zoo["num_blocks"] == 4
    entry = post(
        api,
        "jobs:validate",
        {"name": "v", "model": "mypkg.models:build", "workers": 2, "iterations": 5, "spb": "0,9"},
    )
    assert entry["_status"] == 200 and entry["num_blocks"] is None
    assert "first lease" in str(entry["prediction"]["source"])  # type: ignore[index]
    trace_alias = post(
        api, "jobs:validate", {"name": "v", "model": "bert", "workers": 1, "iterations": 5}
    )
    assert trace_alias["_status"] == 422 and trace_alias["field"] == "model"
    assert api.state.store.count_jobs() == 0


def test_a_malformed_plan_is_named_as_such_before_its_length_is_compared(api: ApiClient) -> None:
    """``0,,1`` is not a plan (docs/API.md, check 2), whatever the number of workers."""
    for workers in (1, 2):
        body = {"name": "p", "model": "mlp", "workers": workers, "iterations": 5, "spb": "0,,1"}
        refused = post(api, "jobs", body)
        assert refused["_status"] == 422 and refused["field"] == "spb"
        assert str(refused["detail"]).startswith("field 'spb': unknown plan '0,,1'"), refused


def test_the_cluster_size_comes_from_the_recorded_inventory(api: ApiClient) -> None:
    body = {"name": "wide", "model": "mlp", "workers": 6, "iterations": 5}
    refused = post(api, "jobs", body)
    assert refused["_status"] == 422 and refused["field"] == "workers"
    assert "4 GPUs" in str(refused["detail"])  # JIGSAW_GPUS before the scheduler recorded any
    run_round(api, Cluster.uniform(8, 4))  # the executor's cluster: 8 GPUs
    time.sleep(INVENTORY_MAX_AGE_S)  # submissions may use an inventory read this old
    assert post(api, "jobs", body)["_status"] == 201


# -- a gang the cluster shrank below ------------------------------------------------------


@pytest.mark.parametrize("policy", ["fifo", "las"])
def test_a_gang_the_cluster_shrank_below_is_marked_and_skipped(
    any_api: ApiClient, policy: str
) -> None:
    api = any_api
    cluster = Cluster.uniform(4, 2)
    run_round(api, cluster, policy)  # the inventory: 4 GPUs, so a 4-worker gang is accepted
    big = api.submit(name="big", workers=4)
    small = api.submit(name="small", workers=1)
    shrunk = cluster.without_node(1)  # a node is lost: 2 GPUs left alive
    run_round(api, shrunk, policy)
    run_round(api, shrunk, policy)  # marked once, not once per round

    # The small job behind the big gang started: the gang does not block the queue.
    assert api.state.store.get(str(small["id"])).state in (JobState.ADMITTED, JobState.RUNNING)
    big_job = api.state.store.get(str(big["id"]))
    assert big_job.state is JobState.PENDING
    assert big_job.reason.startswith("unschedulable: needs 4 GPUs but the cluster has 2 alive")
    marks = [e for e in api.state.store.events(str(big["id"])) if "unschedulable" in e.reason]
    assert len(marks) == 1 and marks[0].from_state is marks[0].to_state is JobState.PENDING
    assert marks[0].code == "Pending/Unschedulable"
    shown = api.client.get(f"/api/v1/jobs/{big['id']}/events", headers=api.headers("alice"))
    codes = [(e["code"], e["reason"].split(":")[0]) for e in shown.json()["items"]]
    assert codes == [("Pending/Submitted", "submitted"), ("Pending/Unschedulable", "unschedulable")]

    queue = api.client.get("/api/v1/scheduler/queue", headers=api.headers("alice")).json()
    entry = next(item for item in queue["items"] if item["job_id"] == big["id"])
    assert entry["estimated_start_at"] is None and entry["estimated_wait_s"] is None
    assert "needs 4 GPUs" in entry["blocked"]

    # The node comes back and the small job ends: the big gang starts as usual.
    api.client.post(f"/api/v1/jobs/{small['id']}/cancel", headers=api.headers("alice"))
    run_round(api, cluster, policy)
    assert api.state.store.get(str(big["id"])).state in (JobState.ADMITTED, JobState.RUNNING)


def test_queue_gives_no_estimate_to_a_job_over_its_quota(tmp_path: object, sqlite_url: str) -> None:
    made = make_api(sqlite_url, tmp_path)
    with made.client:
        job = made.submit(name="q", workers=3, queue="team")
        made.state.settings.queue_quotas = {"team": 2}  # the quota was lowered after submit
        items = made.client.get("/api/v1/scheduler/queue", headers=made.headers("alice")).json()
        entry = items["items"][0]
        assert entry["job_id"] == job["id"] and entry["estimated_start_at"] is None
        assert "team" in entry["blocked"]
    made.state.engine.dispose()


# -- JIGSAW_PRIVATE_JOBS -----------------------------------------------------------------


@pytest.fixture(params=[False, True], ids=["public", "private"])
def shared_api(
    request: pytest.FixtureRequest, database_url: str, tmp_path: object
) -> Iterator[ApiClient]:
    made = make_api(database_url, tmp_path, private_jobs=request.param)
    with made.client:
        yield made
    made.state.engine.dispose()


def dashboard_data(api: ApiClient, who: str) -> str:
    """Everything the dashboard (api/dashboard/static/dashboard.js) fetches with a token."""
    paths = [
        "cluster",
        "cluster/utilization",
        "scheduler",
        "scheduler/queue",
        "cluster/packing",
        "cluster/gpus",
        "jobs",
    ]
    answers = {p: api.client.get(f"/api/v1/{p}", headers=api.headers(who)).json() for p in paths}
    return json.dumps(answers)


def test_private_jobs_hides_other_users_jobs_in_shared_views(shared_api: ApiClient) -> None:
    api = shared_api
    private = api.state.settings.private_jobs
    bobs_running = api.submit("bob", name="bob-secret-run", workers=2, iterations=10_000)
    alices = api.submit("alice", name="alice-own", workers=2, iterations=10_000)
    run_round(api, Cluster.uniform(4, 2))
    bobs_waiting = api.submit("bob", name="bob-secret-wait", workers=4)
    run_round(api, Cluster.uniform(4, 2))

    seen_by_alice = dashboard_data(api, "alice")
    for secret in (str(bobs_running["id"]), str(bobs_waiting["id"]), "bob-secret", '"bob"'):
        assert (secret in seen_by_alice) is not private, secret
    assert str(alices["id"]) in seen_by_alice and "alice-own" in seen_by_alice
    if private:
        assert "another user's job" in seen_by_alice

    # What the views need stays: bob's workers still load their GPUs, his job keeps its place.
    cluster = api.client.get("/api/v1/cluster", headers=api.headers("alice")).json()
    placed = [w for gpu in cluster["gpus"] for w in gpu["workers"]]
    assert len(placed) == 4 and all(w["predicted_load"] for w in placed)
    assert len({w["job_id"] for w in placed}) == 2  # two jobs, even when one is an alias
    queue = api.client.get("/api/v1/scheduler/queue", headers=api.headers("alice")).json()
    assert [item["position"] for item in queue["items"]] == [1]
    assert (queue["items"][0]["user"] == "another user") is private

    # Admins always see everything; bob sees his own.
    assert str(bobs_waiting["id"]) in dashboard_data(api, "admin")
    assert "bob-secret-wait" in dashboard_data(api, "bob")


def test_private_jobs_also_masks_job_ids_inside_decision_reasons(
    tmp_path: object, sqlite_url: str
) -> None:
    made = make_api(sqlite_url, tmp_path, private_jobs=True)
    with made.client:
        bobs = made.submit("bob", name="b", workers=1, iterations=10_000)
        run_round(made, Cluster.uniform(4, 2))
        scheduler = made.client.get("/api/v1/scheduler", headers=made.headers("alice")).json()
        assert scheduler["last_decisions"] and bobs["id"] not in json.dumps(scheduler)
        assert scheduler["last_decisions"][0]["job_id"].startswith("hidden-")
    made.state.engine.dispose()


# -- the documented edges ----------------------------------------------------------------


def test_openapi_documents_the_keyed_submit_409_and_the_key_reuse_422(api: ApiClient) -> None:
    operation = api.client.get("/openapi.json").json()["paths"]["/api/v1/jobs"]["post"]
    assert "60 s" in operation["responses"]["409"]["description"]
    assert "Idempotency-Key" in operation["responses"]["422"]["description"]


def test_bearer_with_one_space_works_and_two_do_not(api: ApiClient) -> None:
    token = api.tokens["alice"]
    ok = api.client.get("/api/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    lower = api.client.get("/api/v1/jobs", headers={"Authorization": f"bearer {token}"})
    two = api.client.get("/api/v1/jobs", headers={"Authorization": f"Bearer  {token}"})
    trailing = api.client.get("/api/v1/jobs", headers={"Authorization": f"Bearer {token} "})
    assert (ok.status_code, lower.status_code) == (200, 200)
    assert two.status_code == trailing.status_code == 401
    assert "one space" in two.json()["detail"]
