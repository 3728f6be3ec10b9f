"""One co-location model: under every trace semantics (jigsaw's oracle rates, Gavel's table,
Pollux's measured step times), in the service's simulated executor (the configured rate) and
under every sharing setting, the iteration times the policy
predicts for a packing decision are the rates the simulated executor then applies.

The decision is the one jigsaw's policy makes in tests/core/policies/test_jigsaw_slack.py: a
four-worker host switched to an SPB plan in place, with one-worker guests on its partial
workers' GPUs. The prediction is the policy's pricing path: the plan catalog's timing of each
gang and the oracle's co-location model. The executor's rate is read back as progress over
time, and must be its solo rate times the predicted fraction ``T_alone / T_shared``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jigsaw.model.cluster import Placement
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.hardware import preset
from jigsaw.model.plan import Plan, full_backprop, uniform
from jigsaw.oracle import Oracle, SharingSettings
from jigsaw.policies.shared.plans import PlanCatalog
from jigsaw.scheduling.clock import VirtualClock
from jigsaw.simulator.pollux_rate import PolluxRate
from jigsaw.simulator.rate_executor import RateDrivenExecutor
from jigsaw.simulator.rate_model import RateModel
from jigsaw.simulator.rates import GavelRate, OracleRate, OverheadModel
from jigsaw.simulator.replay_executor import ReplayExecutor
from jigsaw.simulator.service_rates import ColocatedConstantRate
from jigsaw.traces import GavelThroughputs
from jigsaw.traces.pollux_apps import load_pollux_app
from tests.core.support import planner_for

APPS = Path(__file__).resolve().parents[2] / "data" / "pollux" / "apps"
SETTINGS = {
    "timeslice": SharingSettings(),
    "concurrent": SharingSettings("concurrent"),
    "timeslice+interference": SharingSettings("timeslice", 0.3),
    "concurrent+interference": SharingSettings("concurrent", 0.3),
}
HOST_GPUS: Placement = ((0, 0), (0, 1), (0, 2), (0, 3))
ELAPSED_S = 100.0


def _packing(semantics: str, oracle: Oracle) -> list[tuple[Job, Plan, Placement]]:
    """The host on four GPUs under an SPB plan, guests on two of its partial workers' GPUs."""
    host_model, guest_models = (
        ("cifar10", ("cifar10", "cifar10"))
        if semantics == "pollux"
        else ("resnet50_32", ("resnet18_32", "vgg16_32"))
    )
    batch = 128 if semantics == "pollux" else 32
    blocks = oracle.num_blocks(host_model)
    packing = [
        (
            Job("host", JobSpec("host", host_model, 4, 10**9, batch_size=batch), 0.0),
            uniform(4, blocks, blocks - 1),
            HOST_GPUS,
        )
    ]
    for index, model in enumerate(guest_models, start=1):
        job = Job(f"guest{index}", JobSpec(f"guest{index}", model, 1, 10**9, batch_size=batch), 0.0)
        packing.append((job, full_backprop(1, oracle.num_blocks(model)), (HOST_GPUS[index],)))
    return packing


def _rates(semantics: str, oracle: Oracle, jobs: list[Job]) -> RateModel:
    oracle_rate = OracleRate(oracle, 4)
    if semantics == "jigsaw":
        return oracle_rate
    if semantics == "service":
        return ColocatedConstantRate(oracle, 10.0)
    if semantics == "gavel":
        job_types = {job.id: f"type-{job.spec.model}" for job in jobs}
        alone = {
            ("v100", job_types[job.id], job.spec.workers): 3.0 + index
            for index, job in enumerate(jobs)
        }
        return GavelRate(GavelThroughputs(alone, {}), "v100", job_types, oracle_rate)
    return PolluxRate({"cifar10": load_pollux_app(APPS, "cifar10")}, 4, oracle)


def _predicted_fractions(
    oracle: Oracle, packing: list[tuple[Job, Plan, Placement]]
) -> dict[str, float]:
    catalog = PlanCatalog(oracle, planner=planner_for(oracle))
    timings = {}
    for job, plan, placement in packing:
        timing = catalog.timing(job, plan, placement)
        assert timing is not None
        timings[job.id] = timing
    times = oracle.colocation.iteration_times(timings)
    return {job_id: timings[job_id].alone_s / times[job_id] for job_id in timings}


def _applied_rates(
    rates: RateModel, packing: list[tuple[Job, Plan, Placement]]
) -> dict[str, float]:
    executor = (
        RateDrivenExecutor(rates, report_progress=True)
        if isinstance(rates, ColocatedConstantRate)
        else ReplayExecutor(rates, OverheadModel(restart_s=0.0), VirtualClock(0.0))
    )
    for job, plan, placement in packing:
        executor.start(job, placement, plan)
    return {job.id: executor.progress(job.id, ELAPSED_S) / ELAPSED_S for job, _, _ in packing}


@pytest.mark.parametrize("sharing", sorted(SETTINGS))
@pytest.mark.parametrize("semantics", ["jigsaw", "gavel", "pollux", "service"])
def test_the_executor_applies_what_the_policy_predicted(semantics: str, sharing: str) -> None:
    oracle = Oracle(preset("v100"), sharing=SETTINGS[sharing])
    packing = _packing(semantics, oracle)
    rates = _rates(semantics, oracle, [job for job, _, _ in packing])
    predicted = _predicted_fractions(oracle, packing)
    applied = _applied_rates(rates, packing)
    for job, plan, placement in packing:
        solo = rates.rate(job, placement, plan, {})
        assert applied[job.id] == pytest.approx(solo * predicted[job.id], rel=1e-9), job.id
    # Sharing costs the guests something: the check is not of rates left alone.
    assert min(predicted["guest1"], predicted["guest2"]) < 0.99


def test_the_sharing_mode_changes_what_the_executor_applies() -> None:
    applied = {}
    for name in ("timeslice", "concurrent", "timeslice+interference"):
        oracle = Oracle(preset("v100"), sharing=SETTINGS[name])
        packing = _packing("jigsaw", oracle)
        applied[name] = _applied_rates(OracleRate(oracle, 4), packing)
    assert applied["timeslice"]["guest1"] != pytest.approx(applied["concurrent"]["guest1"])
    for job_id, rate in applied["timeslice"].items():
        assert applied["timeslice+interference"][job_id] == pytest.approx(rate * 0.7)


def test_the_service_falls_back_to_dividing_the_rate_for_a_model_it_cannot_price() -> None:
    oracle = Oracle(preset("v100"))
    rates = ColocatedConstantRate(oracle, 10.0)
    known = Job("known", JobSpec("known", "resnet18_32", 1, 10**9), 0.0)
    opaque = Job("opaque", JobSpec("opaque", "mypkg.models:build", 1, 10**9), 0.0)
    plan = full_backprop(1, oracle.num_blocks("resnet18_32"))
    applied = _applied_rates(rates, [(known, plan, ((0, 0),)), (opaque, plan, ((0, 0),))])
    assert applied == {"known": pytest.approx(5.0), "opaque": pytest.approx(5.0)}
