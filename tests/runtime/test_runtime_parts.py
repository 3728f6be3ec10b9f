"""The Ray runtime's parts that need no Ray: control agreement, ledger, checkpoints, settings,
lease summaries and failure classification."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest

from jigsaw.model.block_noise import BlockNoise
from jigsaw.model.errors import InvalidPlanError, InvalidSpecError
from jigsaw.model.lease_outcome import InvalidLeaseOutcomeError, LeaseOutcome
from jigsaw.model.plan import PlanRequest, SPBPlan, full_backprop
from worker.runtime.checkpoints import CheckpointStore
from worker.runtime.control import ControlChannel, is_control_point
from worker.runtime.failures import classify
from worker.runtime.ledger import ProgressLedger
from worker.runtime.messages import LeaseReport, PlanOffer
from worker.runtime.settings import RuntimeSettings
from worker.runtime.spb_lease import plan_for_built_model
from worker.runtime.summary import InconsistentLeaseError, lease_overhead_s, summarize
from worker.spb import CheckpointError


class ThreadAllReduceMax:
    """A MAX all-reduce among threads, standing in for torch.distributed."""

    def __init__(self, world: int) -> None:
        self._barrier = threading.Barrier(world)
        self._values: dict[int, list[int]] = {}
        self._lock = threading.Lock()

    def for_rank(self, rank: int):
        def reduce_max(values: list[int]) -> list[int]:
            with self._lock:
                self._values[rank] = values
            self._barrier.wait()
            result = [max(column) for column in zip(*self._values.values(), strict=True)]
            self._barrier.wait()
            return result

        return reduce_max


def test_ranks_agree_on_the_newest_plan_every_rank_holds_and_on_stop() -> None:
    world = 3
    channels = [ControlChannel(PlanOffer(0, (0, 1, 2))) for _ in range(world)]
    # Version 1 reached every rank, version 2 only ranks 0 and 2 so far; rank 1 was asked to stop.
    for channel in channels:
        channel.offer(PlanOffer(1, (0, 2, 2)))
    channels[0].offer(PlanOffer(2, (0, 0, 0)))
    channels[2].offer(PlanOffer(2, (0, 0, 0)))
    channels[1].request_stop()
    reducer = ThreadAllReduceMax(world)
    results: dict[int, object] = {}

    def rank_body(rank: int) -> None:
        results[rank] = channels[rank].agree(reducer.for_rank(rank))

    threads = [threading.Thread(target=rank_body, args=(r,)) for r in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    agreements = [results[r] for r in range(world)]
    assert all(a.stop for a in agreements)  # type: ignore[attr-defined]
    assert {a.plan for a in agreements} == {PlanOffer(1, (0, 2, 2))}  # type: ignore[attr-defined]
    assert all(c.current.version == 1 for c in channels)


def test_agreement_installs_nothing_when_no_newer_version_is_common() -> None:
    channel = ControlChannel(PlanOffer(3, (0, 1)))
    agreement = channel.agree(lambda values: values)
    assert agreement.plan is None and not agreement.stop


def test_control_points_fall_on_lease_starts_and_multiples() -> None:
    assert [i for i in range(37, 80) if is_control_point(i, 37, 25)] == [37, 50, 75]


def test_ledger_accepts_only_forward_progress_of_the_newest_attempt() -> None:
    ledger = ProgressLedger()
    assert ledger.accept("j", 1, 50)
    assert not ledger.accept("j", 1, 50)  # duplicate
    assert not ledger.accept("j", 1, 40)  # late
    assert ledger.accept("j", 2, 30)  # a restart from an older checkpoint
    assert not ledger.accept("j", 1, 100)  # the zombie of attempt 1
    assert ledger.accept("j", 2, 80)


def test_checkpoint_store_finds_the_latest_committed_and_prunes(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, "j-1")
    assert store.latest() is None
    for iteration in (50, 100, 150):
        path = store.path_for(iteration)
        path.mkdir(parents=True)
        (path / "meta.json").write_text("{}")
    torn = store.path_for(120)  # killed mid-save: no commit marker
    torn.mkdir()
    in_progress = store.path_for(200)
    in_progress.mkdir()
    latest = store.latest()
    assert latest is not None and latest[0] == 150
    store.prune(keep=2)
    assert [it for it, _ in store.complete()] == [100, 150]
    assert not torn.exists()
    assert in_progress.exists()  # newer than every commit: may still be being written
    store.remove_all()
    assert not store.directory.exists()


def test_settings_come_from_the_environment_and_reject_nonsense(tmp_path: Path) -> None:
    env = {
        "JIGSAW_RAY_ADDRESS": "10.0.0.1:6379",
        "JIGSAW_LEASE_ITERATIONS": "20",
        "JIGSAW_GPUS": "8",
        "JIGSAW_DATA_DIR": str(tmp_path),
    }
    settings = RuntimeSettings.from_env(env)
    assert settings.ray_address == "10.0.0.1:6379"
    assert settings.lease_iterations == 20
    assert settings.local_gpus == 8
    assert settings.checkpoint_dir == tmp_path / "ckpt"
    with pytest.raises(InvalidSpecError, match="JIGSAW_LEASE_ITERATIONS must be a number"):
        RuntimeSettings.from_env({"JIGSAW_LEASE_ITERATIONS": "many"})
    with pytest.raises(InvalidSpecError, match="must be positive"):
        RuntimeSettings.from_env({"JIGSAW_LEASE_ITERATIONS": "0"})
    with pytest.raises(InvalidSpecError, match="GPU_PER_WORKER"):
        RuntimeSettings(gpu_per_worker=1.5)


STAIRCASE = SPBPlan((0, 1), 4)


def report(rank: int, end: int, plan: SPBPlan = STAIRCASE, **changes: object) -> LeaseReport:
    values: dict[str, object] = {
        "job_id": "j",
        "attempt": 1,
        "rank": rank,
        "lease": 0,
        "start_iteration": end - 2,
        "end_iteration": end,
        "plan_version": 0,
        "plan": plan,
        "num_blocks": 4,
        "switches": (),
        "stopped": False,
        "losses": (2.0, 1.0),
        "samples": 64,
        "compute_s": 0.2,
        "sync_s": 0.02,
        "iteration_s": 0.3,
        "steps_wall_s": 0.32,
        "wall_s": 0.4,
        "control_s": 0.01,
        "saved_activation_bytes": 1000 * (2 - rank),
        "peak_memory_bytes": 5000,
        "bytes_sent": 10 * (rank + 1),
        "idle_before_s": 0.005,
        "checkpoint_s": 0.05,
    }
    values.update(changes)
    return LeaseReport(**values)  # type: ignore[arg-type]


def test_summary_reports_per_rank_costs_and_the_lease_overhead() -> None:
    outcome = summarize([report(1, 10), report(0, 10, metrics={"accuracy": 0.9})])
    assert outcome.loss == pytest.approx(1.5)
    assert outcome.throughput == pytest.approx(128 / 0.4)
    assert [rank.saved_activation_bytes for rank in outcome.ranks] == [2000, 1000]
    assert outcome.evaluation == {"accuracy": 0.9}
    assert outcome.plan == SPBPlan((0, 1), 4) and outcome.num_blocks == 4
    # The JSON form the API shows keeps the keys lease summaries always had.
    metrics = outcome.as_metrics()
    assert metrics["loss"] == pytest.approx(1.5)
    assert metrics["throughput"] == pytest.approx(128 / 0.4)
    assert metrics["saved_activation_bytes"] == [2000, 1000]
    assert metrics["bytes_sent"] == [10, 20]
    assert metrics["per_rank_compute_s"] == [pytest.approx(0.1), pytest.approx(0.1)]
    assert metrics["accuracy"] == 0.9
    assert metrics["plan"] == [0, 1] and metrics["num_blocks"] == 4
    assert list(metrics) == [
        "lease", "attempt", "lease_iterations", "plan", "plan_kind", "plan_text", "num_blocks",
        "plan_version", "loss", "last_loss", "throughput", "iterations_per_s",
        "iteration_time_s", "per_rank_compute_s", "per_rank_sync_s", "saved_activation_bytes",
        "peak_memory_bytes", "bytes_sent", "lease_wall_s", "steps_wall_s", "eval_s",
        "control_s", "checkpoint_s", "lease_overhead_s", "lease_overhead_fraction", "accuracy",
    ]  # fmt: skip
    # 0.4 wall - 0.32 in steps - 0.05 checkpoint + 0.005 idle before the lease
    assert lease_overhead_s(report(0, 10)) == pytest.approx(0.035)
    with pytest.raises(InconsistentLeaseError, match="different iterations"):
        summarize([report(0, 10), report(1, 12)])
    with pytest.raises(InconsistentLeaseError, match="different plans"):
        summarize([report(0, 10), report(1, 10, plan=SPBPlan((0, 0), 4))])


def test_bad_specs_fail_for_good_and_everything_else_is_retried() -> None:
    assert not classify(InvalidSpecError("unknown model 'x'", field="model")).retryable
    assert not classify(CheckpointError("belongs to another model")).retryable
    lost_peer = classify(RuntimeError("Connection closed by peer [10.0.0.2]:1234"))
    assert lost_peer.retryable and "RuntimeError" in lost_peer.reason


def ray_node(node_id: str, ip: str, gpus: float, alive: bool = True) -> dict[str, object]:
    resources = {"CPU": 8.0, **({"GPU": gpus} if gpus else {})}
    if gpus:
        resources["accelerator_type:A100"] = 1.0
    return {
        "NodeID": node_id,
        "NodeManagerAddress": ip,
        "NodeManagerHostname": f"host-{ip}",
        "Alive": alive,
        "Resources": resources if alive else {},
    }


def test_inventory_keeps_node_indexes_stable_and_reports_lost_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from worker.runtime import inventory

    nodes = [
        ray_node("head0000", "10.0.0.1", 0),  # a GPU-less head is never offered
        ray_node("bbbb1111", "10.0.0.3", 4),
        ray_node("aaaa2222", "10.0.0.2", 8),
    ]
    monkeypatch.setattr(inventory.ray, "nodes", lambda: list(nodes))
    inv = inventory.RayInventory()
    cluster = inv.cluster()
    assert [(n.index, n.num_gpus, n.gpu_type, n.alive) for n in cluster.nodes] == [
        (0, 8, "a100", True),
        (1, 4, "a100", True),
    ]
    assert inv.node(0).node_id == "aaaa2222" and inv.node(1).ip == "10.0.0.3"
    # Node 0 dies and a new node joins: indexes do not shift; the dead node stays, not alive.
    nodes[2] = ray_node("aaaa2222", "10.0.0.2", 8, alive=False)
    nodes.append(ray_node("0000cccc", "10.0.0.0", 2))
    cluster = inv.cluster()
    assert [(n.index, n.num_gpus, n.alive) for n in cluster.nodes] == [
        (0, 8, False),
        (1, 4, True),
        (2, 2, True),
    ]
    assert cluster.num_gpus == 6 and inv.node(2).node_id == "0000cccc"
    # Ray forgetting a node entirely is the same loss.
    del nodes[1]
    assert not inv.cluster().nodes[1].alive


def test_a_lease_report_enters_as_a_typed_outcome_and_bad_noise_is_refused_there() -> None:
    good = BlockNoise(1, 0.5, 2.0, 8, 10, 9, 2)
    outcome = summarize([report(0, 10, block_noise=(good,)), report(1, 10, block_noise=(good,))])
    assert isinstance(outcome, LeaseOutcome)
    assert outcome.block_noise == (good,) and outcome.noise_refused is None
    assert outcome.as_metrics()["block_noise"] == [good.as_dict()]
    negative = replace(good, grad_var=-1.0)
    refused = summarize([report(0, 10, block_noise=(negative,)), report(1, 10)])
    assert refused.block_noise == () and "block_noise" not in refused.as_metrics()
    assert refused.noise_refused == (
        "lease report: block 1: grad_var -1.0 is negative (a variance cannot be)"
    )
    beyond = replace(good, block=5)
    refused = summarize([report(0, 10, block_noise=(beyond,)), report(1, 10)])
    assert refused.noise_refused == "lease report: block 5: block must be in 1..4"
    # The lease itself still counts: its progress and figures are kept.
    assert refused.loss == pytest.approx(1.5) and refused.plan == SPBPlan((0, 1), 4)


def test_a_lease_report_whose_plan_contradicts_its_block_count_is_refused() -> None:
    with pytest.raises(InvalidLeaseOutcomeError, match="built 3"):
        LeaseOutcome(plan=SPBPlan((0, 1), 4), num_blocks=3)
    wrong_k = SPBPlan((0, 1), 5)  # the ranks report K = 4
    with pytest.raises(InvalidLeaseOutcomeError, match="is for 5 blocks but the workers built 4"):
        summarize([report(0, 10, plan=wrong_k), report(1, 10, plan=wrong_k)])


def test_a_plan_meets_the_k_the_workers_built_in_one_place() -> None:
    unknown = full_backprop(2, 1)  # what the control plane starts a job of unknown K with
    request = PlanRequest.parse("staircase")
    assert plan_for_built_model(unknown, request, 6) == SPBPlan((0, 3), 6)
    assert plan_for_built_model(unknown, None, 6) == full_backprop(2, 6)
    known = SPBPlan((0, 2), 4)
    assert plan_for_built_model(known, None, 4) is known
    with pytest.raises(InvalidPlanError, match="outside the model"):
        plan_for_built_model(unknown, PlanRequest.parse("0,5"), 3)
