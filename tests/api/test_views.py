"""Cluster, packing, utilization, scheduler and queue views over real scheduler rounds."""

from __future__ import annotations

import time
from dataclasses import replace

from api.queue_estimate import estimate_queue
from api.scheduler.recorder import ProgressRecorder, RoundRecorder
from api.store import SqlStore
from api.store.telemetry import ProgressSample, Telemetry
from jigsaw.model.block_noise import BlockNoise
from jigsaw.model.cluster import Cluster
from jigsaw.model.domain import Job, JobSpec, transition
from jigsaw.model.executor_events import Finished, Progressed
from jigsaw.model.lease_outcome import LeaseOutcome
from jigsaw.model.lifecycle import JobState
from jigsaw.policies import create_policy
from jigsaw.scheduling.clock import WallClock
from jigsaw.scheduling.cycle import SchedulingCycle
from jigsaw.simulator.rate_executor import ConstantRate, RateDrivenExecutor
from tests.api.conftest import ApiClient, make_api


def run_round(api: ApiClient, cluster: Cluster) -> None:
    with api.state.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE scheduler_leader SET epoch = 1")
    store = SqlStore(api.state.engine, epoch=1)
    recorder = RoundRecorder(api.state.engine, api.state.metrics, 1, "fifo")
    cycle = SchedulingCycle(
        store,
        RateDrivenExecutor(ConstantRate(10.0)),
        create_policy("fifo", planner=api.state.planner),
        WallClock(),
        lambda: cluster,
        on_decision=lambda now, d: recorder.on_decision(store, now, d),
    )
    recorder.after_round(cycle.run_once(), cluster)


def test_cluster_scheduler_and_queue_views_after_a_round(api: ApiClient) -> None:
    running = api.submit(name="big", model="digits_cnn", workers=3, iterations=100)
    waiting = api.submit(name="next", model="mlp", workers=2, iterations=10)
    run_round(api, Cluster.uniform(4, 2))
    get = lambda path: api.client.get(path, headers=api.headers("worker")).json()  # noqa: E731
    cluster = get("/api/v1/cluster")
    assert [node["name"] for node in cluster["nodes"]] == ["node-0", "node-1"]
    assert cluster["sharing"] == "timeslice"  # the default; a client words a shared GPU by it
    placed = [w for gpu in cluster["gpus"] for w in gpu["workers"]]
    assert sorted(w["rank"] for w in placed) == [0, 1, 2]
    assert {w["job_id"] for w in placed} == {running["id"]}
    assert all(w["predicted_load"] and w["memory_bytes"] for w in placed)
    assert get("/api/v1/cluster/packing")["items"] == []
    assert len(get("/api/v1/cluster/gpus")["items"]) == 4
    utilization = get("/api/v1/cluster/utilization")["items"]
    assert utilization[-1]["busy_gpus"] == 3 and utilization[-1]["utilization"] == 0.75
    scheduler = get("/api/v1/scheduler")
    assert scheduler["round"] == 1 and scheduler["epoch"] == 1 and scheduler["leader"]
    assert scheduler["last_decisions"][0]["kind"] == "start"
    queue = get("/api/v1/scheduler/queue")
    assert [entry["job_id"] for entry in queue["items"]] == [waiting["id"]]
    assert queue["items"][0]["position"] == 1
    # The big job holds 3 of 4 GPUs for ~10 s at the simulator's 10 it/s: the estimate says so.
    assert 5 < queue["items"][0]["estimated_wait_s"] < 15
    assert "estimate" in queue["note"]


def test_packing_lists_only_gpus_shared_by_several_jobs(api: ApiClient) -> None:
    api.submit(name="a", workers=2)
    packed = api.state.store.get(str(api.submit(name="b", workers=1)["id"]))
    run_round(api, Cluster.uniform(2, 2))  # a takes both GPUs; b waits
    moved, event = transition(  # as a packing policy would: b shares GPU (0, 0) with a
        packed, JobState.ADMITTED, reason="packed", at=1.0, actor="t", placement=((0, 0),)
    )
    api.state.store.save(moved, expected_version=packed.version, event=event)
    packing = api.client.get("/api/v1/cluster/packing", headers=api.headers("alice")).json()
    assert [gpu["id"] for gpu in packing["items"]] == [[0, 0]]
    assert len(packing["items"][0]["workers"]) == 2


def test_queue_estimate_waits_for_gpus_in_queue_order() -> None:
    now = time.time()

    def job(job_id: str, workers: int, state: JobState, done: float = 0.0, gpus: int = 0) -> Job:
        spec = JobSpec(name=job_id, model="mlp", workers=workers, iterations=100)
        placement = tuple((0, g) for g in range(gpus))
        return Job(job_id, spec, now - 10, state, iterations_done=done, placement=placement)

    jobs = [
        job("r1", 2, JobState.RUNNING, done=50, gpus=2),  # frees 2 GPUs at +5 s
        job("r2", 2, JobState.RUNNING, done=0, gpus=2),  # frees 2 GPUs at +10 s
        job("w1", 3, JobState.PENDING),  # needs 3: both must finish -> +10 s
        job("w2", 1, JobState.PENDING),  # FIFO: not before w1 -> +10 s
        job("w3", 9, JobState.PENDING),  # never fits a 4-GPU cluster
    ]
    estimates = estimate_queue(jobs[:2], jobs[2:], 4, now, lambda _job: 10.0)
    starts = {e.job.id: e.start_at for e in estimates}
    assert [e.position for e in estimates] == [1, 2, 3]
    assert starts["w1"] == starts["w2"] == now + 10
    assert starts["w3"] is None


def test_reported_progress_shows_in_the_job_progress_and_logs(api: ApiClient) -> None:
    job_id = str(api.submit(name="loss", workers=1, iterations=100)["id"])
    run_round(api, Cluster.uniform(1, 1))
    store = SqlStore(api.state.engine)
    recorder = ProgressRecorder(store, Telemetry(api.state.engine), lease_iterations=50)
    # As the cycle does: the hook sees the report, then the progress is folded in.
    recorder(Progressed(job_id, time.time(), 60.0, LeaseOutcome(loss=0.5, log_lines=("hello",))))
    job = store.get(job_id)
    store.save(replace(job, iterations_done=60.0), expected_version=job.version)
    headers = api.headers("alice")
    shown = api.client.get(f"/api/v1/jobs/{job_id}", headers=headers).json()
    assert shown["last_loss"] == 0.5 and shown["progress"] == 0.6
    listed = api.client.get("/api/v1/jobs", headers=headers).json()["items"]
    assert listed[0]["last_loss"] == 0.5
    samples = api.client.get(f"/api/v1/jobs/{job_id}/progress", headers=headers).json()
    assert [(s["iteration"], s["loss"]) for s in samples["items"]] == [(60.0, 0.5)]
    assert (
        api.client.get(
            f"/api/v1/jobs/{job_id}/progress?after_iteration=60", headers=headers
        ).json()["items"]
        == []
    )
    logs = api.client.get(f"/api/v1/jobs/{job_id}/logs", headers=headers).json()
    lines = [entry["line"] for entry in logs["items"]]
    assert any(line.startswith("iteration 60/100 loss 0.5") for line in lines)
    assert lines[-1] == "hello"


def test_a_report_with_refused_noise_keeps_its_progress_and_says_why_in_the_log(
    api: ApiClient,
) -> None:
    job_id = str(api.submit(name="noisy", workers=1, iterations=100)["id"])
    run_round(api, Cluster.uniform(1, 1))
    store = SqlStore(api.state.engine)
    recorder = ProgressRecorder(store, Telemetry(api.state.engine), lease_iterations=50)
    bad = BlockNoise(1, 0.5, float("nan"), 8, 10, 9, 2)
    outcome = LeaseOutcome(loss=0.7, num_blocks=2).with_reported_noise([bad])
    recorder(Progressed(job_id, time.time(), 60.0, outcome))
    headers = api.headers("alice")
    logs = api.client.get(f"/api/v1/jobs/{job_id}/logs", headers=headers).json()
    lines = [entry["line"] for entry in logs["items"]]
    assert (
        "gradient statistics refused, eta estimate kept: "
        "lease report: block 1: grad_var is nan, not finite"
    ) in lines
    samples = api.client.get(f"/api/v1/jobs/{job_id}/progress", headers=headers).json()
    assert [(s["iteration"], s["loss"]) for s in samples["items"]] == [(60.0, 0.7)]
    # The last lease's held-out score closes the log.
    recorder(Finished(job_id, time.time(), 100.0, LeaseOutcome(evaluation={"accuracy": 0.9})))
    logs = api.client.get(f"/api/v1/jobs/{job_id}/logs", headers=headers).json()
    assert logs["items"][-1]["line"].startswith("finished at 100/100")
    assert logs["items"][-1]["line"].endswith('{"accuracy": 0.9}')


def test_progress_samples_are_thinned_past_the_cap_keeping_lease_boundaries(
    api: ApiClient,
) -> None:
    job_id = str(api.submit(name="many", workers=1, iterations=10_000)["id"])
    telemetry = Telemetry(api.state.engine, cap_per_job=20)
    for iteration in range(1, 61):
        telemetry.record(
            ProgressSample(
                job_id, 1, float(iteration), float(iteration), None, None, (0,), {},
                lease_boundary=iteration % 10 == 0,
            )
        )  # fmt: skip
    kept = [row["iteration"] for row in telemetry.progress(job_id, after_iteration=None, limit=100)]
    assert len(kept) <= 20 + 1
    assert {10.0, 20.0, 30.0, 40.0, 50.0, 60.0} <= set(kept)  # every lease boundary survives
    assert kept[-5:] == [56.0, 57.0, 58.0, 59.0, 60.0]  # the newest samples stay dense


def test_the_cluster_says_how_a_shared_gpu_runs(sqlite_url: str, tmp_path: object) -> None:
    """JIGSAW_SHARING=concurrent: the cluster view says so, so that the CLI and the dashboard
    do not call an over-booked GPU time-sliced."""
    api = make_api(sqlite_url, tmp_path, sharing="concurrent")
    with api.client:
        cluster = api.client.get("/api/v1/cluster", headers=api.headers("alice")).json()
    api.state.engine.dispose()
    assert cluster["sharing"] == "concurrent"
