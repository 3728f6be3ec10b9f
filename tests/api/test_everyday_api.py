"""What the API answers a new user's everyday questions with (issue 25): which plan types fit
(``/models``), what a pipeline job's workers do and what its η is, why a job waits (the
queue's ``reason``), the last lines of a log (``tail``, ``since``), and a 404 a client can
reword. In-process app over SQLite with real scheduling rounds."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from api.presenters import NO_SPB, typed_plan_eta
from api.queue_reasons import ClusterNow, waiting_reason
from api.scheduler.recorder import RoundRecorder
from api.scheduler.service import build_policy
from api.store import SqlStore
from jigsaw.efficiency.pipeline import model_pipeline_eta
from jigsaw.model.cluster import Cluster
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.lifecycle import JobState
from jigsaw.model.parallelism import PipelinePlan
from jigsaw.policies.quota import Quotas
from jigsaw.scheduling.clock import WallClock
from jigsaw.scheduling.cycle import SchedulingCycle
from jigsaw.simulator.rate_executor import ConstantRate, RateDrivenExecutor
from tests.api.conftest import ApiClient, make_api

CLUSTER = Cluster.uniform(4, 4)
LIMIT_GIB = 0.25
"""digits_wide_mlp needs ~0.30 GiB per worker data parallel at 4 x 32: a pipeline fits."""
TWO_BW = "2BW's one-step weight delay"
"""How a 2BW pipeline's η source starts (up to its colon: the dashboard's label)."""


@pytest.fixture(scope="module")
def everyday(
    tmp_path_factory: pytest.TempPathFactory, _sqlite_template: Path
) -> Iterator[tuple[ApiClient, dict[str, str]]]:
    """One app for the module: a 4-GPU pipeline job running, two jobs waiting behind it."""
    home = tmp_path_factory.mktemp("everyday")
    database = home / "jigsaw.db"
    database.write_bytes(_sqlite_template.read_bytes())
    api = make_api(f"sqlite:///{database}", home, gpus=4, worker_memory_gib=LIMIT_GIB)
    with api.client:
        run_round = scheduling_rounds(api)
        jobs = {
            # lr 0.001: 2BW's delay costs ~1% (η 0.99), so auto keeps the pipeline.
            "pipe": api.submit(
                name="pipe",
                model="digits_wide_mlp",
                workers=4,
                iterations=10**5,
                learning_rate=0.001,
            ),
            "one": api.submit(name="one", model="mlp", workers=1, iterations=10),
            "two": api.submit(name="two", model="digits_cnn", workers=2, iterations=10),
        }
        for _ in range(3):
            run_round()
        yield api, {name: str(job["id"]) for name, job in jobs.items()}
    api.state.engine.dispose()


def scheduling_rounds(api: ApiClient) -> Callable[[], None]:
    """One scheduling round of ``api``'s app on :data:`CLUSTER` per call, recorded as the
    scheduler process records them (fifo, a constant 10 iterations/s)."""
    with api.state.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE scheduler_leader SET epoch = 1")
    store = SqlStore(api.state.engine, epoch=1)
    recorder = RoundRecorder(api.state.engine, api.state.metrics, 1, "fifo")
    cycle = SchedulingCycle(
        store,
        RateDrivenExecutor(ConstantRate(10.0)),
        build_policy(api.state.settings, api.state.oracle),
        WallClock(),
        lambda: CLUSTER,
        on_decision=lambda now, d: recorder.on_decision(store, now, d),
    )
    return lambda: recorder.after_round(cycle.run_once(), CLUSTER)


def get(api: ApiClient, path: str, who: str = "alice") -> Any:
    response = api.client.get(path, headers=api.headers(who))
    assert response.status_code == 200, response.text
    return response.json()


def test_models_lists_the_zoo_with_the_plan_types_that_fit_the_servers_limit(
    everyday: tuple[ApiClient, dict[str, str]],
) -> None:
    api, _ = everyday
    listed = get(api, "/api/v1/models")
    assert listed["memory_limit_bytes"] == int(LIMIT_GIB * 2**30)
    assert (listed["workers"], listed["batch_size"]) == (4, 32)
    models = {model["name"]: model for model in listed["items"]}
    wide = models["digits_wide_mlp"]
    assert wide["num_blocks"] == 4 and wide["parameters"] > 10**7
    fits = {(a["kind"], a["fits"]) for a in wide["plan_types"]}
    assert ("data", False) in fits and ("pipeline", True) in fits
    # At the listing's default lr (0.05, momentum 0.9) 2BW's one-step weight delay costs the
    # pipeline most of its progress per sample: the hybrid has the better goodput.
    assert [a["kind"] for a in wide["plan_types"] if a["chosen"]] == ["hybrid"]
    # The listing shows the η it ranked by: the pipeline's 2BW delay at the default lr 0.05.
    etas = {a["kind"]: (a["eta"], a["eta_source"]) for a in wide["plan_types"]}
    assert etas["pipeline"][0] == pytest.approx(model_pipeline_eta("digits_wide_mlp", 0.05))
    assert etas["pipeline"][0] < 0.1
    assert etas["pipeline"][1].startswith(TWO_BW) and "lr 0.05, momentum 0.9" in etas["pipeline"][1]
    assert etas["hybrid"] == (1.0, NO_SPB)
    assert not etas["data"][1].startswith("no SPB")
    mlp = {a["kind"]: a["eta"] for a in models["mlp"]["plan_types"]}
    assert mlp["pipeline"] == pytest.approx(model_pipeline_eta("mlp", 0.05))  # its own h
    alone = {m["name"]: m for m in get(api, "/api/v1/models?workers=1")["items"]}
    assert [a["eta_source"] for a in alone["mlp"]["plan_types"]] == ["full backprop"]
    assert alone["digits_wide_mlp"]["plan_types"] == []
    assert "per-worker memory limit" in alone["digits_wide_mlp"]["refusal"]


def test_a_pipeline_job_says_what_it_runs_its_eta_and_each_workers_stage(
    everyday: tuple[ApiClient, dict[str, str]],
) -> None:
    api, jobs = everyday
    job = get(api, f"/api/v1/jobs/{jobs['pipe']}")
    assert job["state"] in ("ADMITTED", "RUNNING") and job["plan_kind"] == "pipeline"
    # 2BW's one-step weight delay at the job's lr 0.001: about 1% of progress, what auto
    # ranked the pipeline by.
    current = job["eta"]["current"]
    assert current["eta"] == pytest.approx(model_pipeline_eta("digits_wide_mlp", 0.001))
    assert 0.99 < current["eta"] < 0.995
    assert current["source"].startswith(TWO_BW) and "lr 0.001, momentum 0.9" in current["source"]
    assert current["plan"].startswith("pipeline[2bw] stages") and current["depths"] == []
    assert job["eta"]["candidates"] == []  # SPB plans cannot apply to a pipeline job
    workers = [w for gpu in get(api, "/api/v1/cluster")["gpus"] for w in gpu["workers"]]
    assert sorted(w["role"] for w in workers) == [f"stage {s}/4" for s in range(1, 5)]
    assert all(w["depth"] is None for w in workers)


def test_a_2bw_jobs_eta_is_its_weight_delay_at_its_lr_and_a_hybrids_is_1(
    sqlite_url: str, tmp_path: Path
) -> None:
    """At lr 0.05 2BW's delay costs mlp three quarters of its progress per sample: the job's
    η says so (the same number auto ranks by) before it starts and while it runs; the
    hybrid beside it is exact synchronous SGD, η 1 with no SPB."""
    api = make_api(sqlite_url, tmp_path, gpus=4)
    with api.client:
        pipe = api.submit(
            name="p", model="mlp", workers=2, parallelism="pipeline", learning_rate=0.05
        )
        hybrid = api.submit(name="h", model="mlp", workers=2, parallelism="hybrid")
        delayed = model_pipeline_eta("mlp", 0.05)
        assert delayed < 0.3
        [before] = pipe["eta"]["candidates"]  # type: ignore[index]
        assert pipe["eta"]["current"] is None  # type: ignore[index]
        assert before["eta"] == pytest.approx(delayed) and before["depths"] == []
        assert before["source"] == (
            f"{TWO_BW}: the 2BW efficiency model at lr 0.05, momentum 0.9; no SPB"
        )
        run_round = scheduling_rounds(api)
        run_round()
        running = get(api, f"/api/v1/jobs/{pipe['id']}")
        assert running["plan_kind"] == "pipeline", running["state"]
        assert running["eta"]["current"] == before and running["eta"]["candidates"] == []
        shown = get(api, f"/api/v1/jobs/{hybrid['id']}")
        assert shown["plan_kind"] == "hybrid", shown["state"]
        assert (shown["eta"]["current"]["eta"], shown["eta"]["current"]["source"]) == (1.0, NO_SPB)
    api.state.engine.dispose()


def test_a_gpipe_pipeline_is_exact_sgd_and_a_2bw_one_is_not() -> None:
    stages = ((1, 2), (3, 4))
    gpipe = PipelinePlan(4, stages, 4, 1, "gpipe")
    assert typed_plan_eta(gpipe, "mlp", 0.05) == (1.0, NO_SPB)
    eta, source = typed_plan_eta(replace(gpipe, schedule="2bw"), "mlp", 0.05)
    assert eta == model_pipeline_eta("mlp", 0.05) and source.startswith(TWO_BW)


def test_the_queue_says_why_each_job_waits(everyday: tuple[ApiClient, dict[str, str]]) -> None:
    api, jobs = everyday
    items = {item["job_id"]: item for item in get(api, "/api/v1/scheduler/queue")["items"]}
    assert items[jobs["one"]]["reason"] == "needs 1 GPU, 0 free"
    assert items[jobs["two"]]["reason"] == "needs 2 GPUs, 0 free, behind one (#1)"


def test_logs_take_the_last_lines_or_the_recent_ones(
    everyday: tuple[ApiClient, dict[str, str]],
) -> None:
    api, jobs = everyday
    path = f"/api/v1/jobs/{jobs['pipe']}/logs"
    every = get(api, path)["items"]
    assert len(every) >= 3
    last = get(api, f"{path}?tail=2")
    assert last["items"] == every[-2:] and last["next"] == every[-1]["seq"]
    future = datetime.fromtimestamp(time.time() + 3600, UTC).isoformat()
    assert get(api, f"{path}?since={future.replace('+00:00', 'Z')}")["items"] == []
    assert get(api, f"{path}?since=2000-01-01T00:00:00Z")["items"] == every


def test_a_missing_job_is_a_404_naming_it_for_clients(
    everyday: tuple[ApiClient, dict[str, str]],
) -> None:
    api, _ = everyday
    response = api.client.get("/api/v1/jobs/j-000000000000", headers=api.headers("alice"))
    assert response.status_code == 404
    assert response.json()["job_id"] == "j-000000000000"


# -- why a job waits, case by case (api/queue_reasons.py) ---------------------------------

NOW = 1_800_000_000.0


def waiting(workers: int, **changes: Any) -> Job:
    spec = JobSpec(name="w", model="mlp", workers=workers, iterations=10, queue="q")
    return Job("j-w", spec, NOW - 60, **changes)


def running(gpus: int, queue: str = "other") -> Job:
    spec = JobSpec(name="r", model="mlp", workers=gpus, iterations=10, queue=queue)
    placement = tuple((0, g) for g in range(gpus))
    return Job(f"j-r{gpus}", spec, NOW - 60, JobState.RUNNING, placement=placement)


REASONS = [
    ("never fits", waiting(8), {"blocked": "needs 8 GPUs; the cluster has 4 alive"},
     "never starts as the cluster is: needs 8 GPUs; the cluster has 4 alive"),
    ("backing off", waiting(1, retry_after=NOW + 30, attempt=2), {},
     "backing off after a failure until 08:00:30Z (attempt 2)"),
    ("no free GPU", waiting(2), {"active": [running(4)]}, "needs 2 GPUs, 0 free"),
    ("behind another", waiting(1), {"ahead": "r18 (#1)", "active": [running(2)]},
     "behind r18 (#1)"),
    ("both", waiting(4), {"ahead": "r18 (#1)", "active": [running(2)]},
     "needs 4 GPUs, 2 free, behind r18 (#1)"),
    ("at its queue quota", waiting(2), {"active": [running(2, queue="q")], "quota": {"q": 3}},
     "at quota: queue 'q' quota is 3 GPUs (2 in use)"),
    ("preempted", waiting(4, state=JobState.PREEMPTED, preempted_by="j-b"),
     {"active": [running(4)]}, "preempted by j-b, needs 4 GPUs, 0 free"),
    ("nothing holds it", waiting(1), {}, "4 GPUs free: starts at the next scheduling round"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "job", "given", "says"), REASONS, ids=[r[0] for r in REASONS])
def test_waiting_reason(case: str, job: Job, given: dict[str, Any], says: str) -> None:
    cluster = ClusterNow.of(given.get("active", []), 4)
    reason = waiting_reason(
        job,
        blocked=given.get("blocked"),
        ahead=given.get("ahead"),
        cluster=cluster,
        quotas=Quotas(given.get("quota", {}), {}),
        now=NOW,
    )
    assert reason == says, case
