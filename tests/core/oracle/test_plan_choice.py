"""Choosing the plan type: what fits memory, then the best predicted samples/s; and the
choice reaching the scheduler's decisions and the simulator's rates."""

from __future__ import annotations

import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Start
from jigsaw.model.domain import Job, JobSpec, submitted_event
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.hardware import preset, with_overrides
from jigsaw.model.lifecycle import JobState
from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from jigsaw.model.plan import SPBPlan
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.oracle.plan_choice import NoPlanFitsError, choose_plan
from jigsaw.planning.planner import Planner
from jigsaw.policies import create_policy
from jigsaw.scheduling.clock import VirtualClock
from jigsaw.scheduling.cycle import SchedulingCycle
from jigsaw.scheduling.memstore import InMemoryStore
from jigsaw.simulator.rate_executor import RateDrivenExecutor
from jigsaw.simulator.rates import OracleRate
from tests.core.oracle.toy_parallel_profile import HW, MB, toy

FAST = with_overrides(HW, intra_node_bandwidth=1e15, intra_node_latency_s=1e-9)
"""A network so fast that data parallelism's all-reduce costs nothing."""


def choose(limit: int, parallelism: str = "auto", margin: float = 0.15, workers: int = 4, hw=HW):
    profile = toy()
    return choose_plan(profile.blocks, profile, hw, workers, 8, limit, parallelism, margin)


def test_a_model_that_fits_runs_data_parallel() -> None:
    choice = choose(10**12, hw=FAST)
    assert choice.chosen.kind == "data" and choice.chosen.plan is None
    kinds = [a.kind for a in choice.alternatives]
    assert kinds == ["data", "pipeline", "pipeline", "hybrid"]  # 2 and 4 stages divide 4
    assert all(a.fits for a in choice.alternatives)


def test_below_the_data_parallel_need_it_picks_a_fitting_pipeline_or_hybrid() -> None:
    need = choose(10**12)
    data = need.alternatives[0].prediction.max_model_bytes
    smallest = min(a.prediction.max_model_bytes for a in need.alternatives[1:])
    assert smallest < data
    limit = (smallest + data) // 2
    choice = choose(limit)
    assert choice.chosen.kind in ("pipeline", "hybrid")
    assert isinstance(choice.chosen.plan, PipelinePlan | HybridPlan)
    assert choice.chosen.prediction.max_model_bytes <= limit
    assert not choice.alternatives[0].fits
    fitting = [a for a in choice.alternatives if a.fits]
    assert choice.chosen.samples_per_s == max(a.samples_per_s for a in fitting)
    assert "over the" in choice.reason


def test_when_nothing_fits_the_error_names_the_limit_and_each_need() -> None:
    with pytest.raises(NoPlanFitsError) as caught:
        choose(1 * MB)
    assert caught.value.field == "parallelism"
    message = str(caught.value)
    assert "JIGSAW_WORKER_MEMORY_GIB" in message and "data x 4 workers needs" in message


def test_auto_keeps_data_parallelism_unless_an_alternative_beats_the_margin() -> None:
    # On a 10 GbE CPU cluster the 43 MB all-reduce dominates: a pipeline (no all-reduce
    # across 4 stages) is predicted well over 1.15x data parallelism's samples/s.
    eager = choose(10**12)
    data = eager.alternatives[0]
    assert eager.chosen.kind != "data"
    assert eager.chosen.samples_per_s > 1.15 * data.samples_per_s
    assert eager.chosen.samples_per_s == max(a.samples_per_s for a in eager.alternatives)
    assert "predicted" in eager.reason
    assert choose(10**12, margin=10.0).chosen.kind == "data"


def test_a_requested_type_is_honoured_or_refused_naming_parallelism() -> None:
    assert choose(10**12, "pipeline").chosen.kind == "pipeline"
    assert choose(10**12, "hybrid").chosen.kind == "hybrid"
    with pytest.raises(InvalidSpecError) as caught:
        choose(10**12, "pipeline", workers=1)
    assert caught.value.field == "parallelism" and "stage count" in str(caught.value)
    profile = toy()
    with pytest.raises(InvalidSpecError) as no_profile:
        choose_plan(profile.blocks, None, HW, 4, 8, 10**12, "hybrid")
    assert no_profile.value.field == "parallelism"


# --- the choice in the scheduler and the simulator (zoo model vgg16_32_fc on a v100) -----

VGG = JobSpec(name="big", model="vgg16_32_fc", workers=2, iterations=40, batch_size=32)


def tight_planner() -> Planner:
    roomy = Planner(preset("v100"))
    choice = roomy.plan_choice(VGG)
    assert choice is not None and choice.chosen.kind == "data"
    data = choice.alternatives[0].prediction.max_model_bytes
    smallest = min(a.prediction.max_model_bytes for a in choice.alternatives[1:])
    return Planner(preset("v100"), memory_limit_bytes=(smallest + data) // 2)


@pytest.fixture
def tight() -> Planner:
    """A planner whose per-worker limit is below data parallelism's need for VGG: handed to
    the policies, never set as a process-wide default."""
    return tight_planner()


@pytest.mark.parametrize("policy", ["fifo", "las", "jigsaw"])
def test_the_decision_carries_the_chosen_pipeline_or_hybrid_plan(
    tight: Planner, policy: str
) -> None:
    job = Job("big", VGG, 0.0)
    options = {"oracle": Oracle(preset("v100"))} if policy == "jigsaw" else {}
    decisions = create_policy(policy, planner=tight, **options).decide(
        Snapshot.build(0.0, Cluster.uniform(4, 4), [job])
    )
    starts = [d for d in decisions if isinstance(d, Start)]
    assert len(starts) == 1
    assert starts[0].plan == tight.typed_plan(VGG)
    assert isinstance(starts[0].plan, PipelinePlan | HybridPlan)


def test_a_data_job_and_an_spb_job_still_get_spb_plans(tight: Planner) -> None:
    jobs = [
        Job(
            "d",
            JobSpec(name="d", model="vgg16_32_fc", workers=2, iterations=9, parallelism="data"),
            0.0,
        ),
        Job(
            "s",
            JobSpec(name="s", model="vgg16_32_fc", workers=2, iterations=9, spb="staircase"),
            0.0,
        ),
    ]
    decisions = create_policy("fifo", planner=tight).decide(
        Snapshot.build(0.0, Cluster.uniform(4, 4), jobs)
    )
    assert all(isinstance(d, Start) and isinstance(d.plan, SPBPlan) for d in decisions)
    assert len(decisions) == 2


def test_the_simulator_runs_the_job_at_the_oracles_predicted_iteration_time(
    tight: Planner,
) -> None:
    oracle = Oracle(preset("v100"))
    store, clock = InMemoryStore(), VirtualClock()
    executor = RateDrivenExecutor(OracleRate(oracle, gpus_per_node=4))
    cluster = Cluster.uniform(4, 4)
    policy = create_policy("fifo", planner=tight)
    cycle = SchedulingCycle(store, executor, policy, clock, lambda: cluster)
    job = Job("big", VGG, 0.0)
    store.add(job, submitted_event(job, "test"))
    for _ in range(100):
        cycle.run_once()
        upcoming = executor.next_event_time()
        if upcoming is None:
            break
        clock.advance_to(max(upcoming, clock.now()))
    done = store.get("big")
    assert done.state is JobState.SUCCEEDED
    plan = tight.typed_plan(VGG)
    assert plan is not None and done.plan == plan
    iteration = oracle.predict_plan_type("vgg16_32_fc", 32, plan).iteration_time_s
    assert done.finished_at is not None and done.started_at is not None
    assert done.finished_at - done.started_at == pytest.approx(40 * iteration, rel=1e-6)


def test_a_requested_type_over_the_limit_says_it_does_not_fit() -> None:
    with pytest.raises(NoPlanFitsError) as caught:
        choose(1 * MB, "data")
    assert str(caught.value).startswith("parallelism data does not fit the per-worker memory")


def test_spec_defaults_and_rows_stored_before_the_field() -> None:
    assert JobSpec(name="a", model="vgg16_32_fc", workers=2, iterations=1).parallelism == "auto"
    assert JobSpec(name="a", model="pkg.mod:fn", workers=2, iterations=1).parallelism == "data"
    assert JobSpec(name="a", model="cifar10", workers=2, iterations=1).parallelism == "data"
    assert (
        JobSpec(name="a", model="mlp", workers=2, iterations=1, parallelism=" Hybrid ").parallelism
        == "hybrid"
    )
    old = {"name": "a", "model": "mlp", "workers": 2, "iterations": 1, "spb": "auto"}
    assert JobSpec.from_stored(old).parallelism == "auto"
    assert JobSpec.from_stored({**old, "model": "pkg.mod:fn"}).parallelism == "data"
    with pytest.raises(InvalidSpecError) as caught:
        JobSpec.from_mapping({**old, "parallelism": 3})
    assert caught.value.field == "parallelism"


def test_trace_jobs_run_data_parallel_and_job_lists_may_ask_for_a_type(tmp_path) -> None:
    from jigsaw.simulator.workload import arrivals_from_trace
    from jigsaw.traces.joblist import read_joblist

    path = tmp_path / "jobs.yaml"
    path.write_text(
        "jobs:\n"
        "  - {name: a, model: vgg16_32_fc, workers: 2, iterations: 5, parallelism: hybrid}\n"
        "  - {name: b, model: vgg16_32_fc, workers: 2, iterations: 5}\n"
    )
    arrivals = arrivals_from_trace(read_joblist(path), lambda job: 1.0)
    assert [a.spec.parallelism for a in arrivals] == ["hybrid", "data"]
    path.write_text("- {name: a, model: mlp, workers: 2, iterations: 5, parallelism: tensor}\n")
    with pytest.raises(InvalidSpecError, match="parallelism must be one of"):
        read_joblist(path)
