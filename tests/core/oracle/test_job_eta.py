"""Online eta per job: lease reports' gradient noise folded into the job by the cycle, bad
reports refused without touching the estimate, and eta answered with its source."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from jigsaw.efficiency.model import eta_for_plan
from jigsaw.efficiency.online import candidate_etas, job_eta, merge_block_noise
from jigsaw.model.block_noise import BlockNoise, InvalidNoiseStatisticsError
from jigsaw.model.executor_events import Progressed
from jigsaw.model.lease_outcome import LeaseOutcome
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import SPBPlan, full_backprop, staircase
from tests.core.support import planner_for, setup, submit


def noise(block: int, sqr: float, var: float, *, at: int = 10, obs: int = 20) -> BlockNoise:
    return BlockNoise(block=block, grad_sqr=sqr, grad_var=var, batch=32,
                      observations=obs, last_iteration=at, contributors=2)  # fmt: skip


def test_merge_keeps_the_newest_statistics_of_each_block() -> None:
    first = merge_block_noise((), [noise(1, 1.0, 2.0, at=10), noise(2, 1.0, 2.0, at=10)], 2)
    second = merge_block_noise(first, [noise(2, 3.0, 4.0, at=20)], 2)
    assert [(e.block, e.grad_sqr, e.last_iteration) for e in second] == [(1, 1.0, 10), (2, 3.0, 20)]
    stale = merge_block_noise(second, [noise(2, 9.0, 9.0, at=5)], 2)
    assert stale == second


def test_merge_refuses_blocks_the_jobs_plan_does_not_have() -> None:
    kept = merge_block_noise((), [noise(1, 1.0, 2.0)], 2)
    with pytest.raises(InvalidNoiseStatisticsError, match=r"block 3: block must be in 1\.\.2"):
        merge_block_noise(kept, [noise(1, 5.0, 5.0, at=99), noise(3, 1.0, 1.0, at=99)], 2)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_report_with_non_finite_statistics_is_refused_whole_at_the_edge(bad: float) -> None:
    with pytest.raises(InvalidNoiseStatisticsError, match=r"block 2: grad_sqr .* not finite"):
        LeaseOutcome(block_noise=(noise(1, 5.0, 5.0), noise(2, bad, 1.0)))
    received = LeaseOutcome(num_blocks=2).with_reported_noise(
        [noise(1, 5.0, 5.0, at=99), noise(2, bad, 1.0, at=99)]
    )
    assert received.block_noise == ()
    assert received.noise_refused is not None and "not finite" in received.noise_refused


def test_the_cycle_folds_noise_into_the_job_and_ignores_a_refused_report() -> None:
    store, _clock, _executor, cycle = setup()
    submit(store, "a", workers=2, iterations=1000, at=0.0)
    cycle.run_once()
    cycle.run_once()
    assert store.get("a").state is JobState.RUNNING
    good = tuple(noise(b, 1.0, 4.0) for b in range(1, 5))
    cycle.observe([Progressed("a", 1.0, 10.0, LeaseOutcome(block_noise=good))])
    measured = store.get("a").block_noise
    assert len(measured) == 4 and measured[0].grad_var == 4.0
    poisoned = LeaseOutcome().with_reported_noise([noise(1, math.nan, 1.0, at=30)])
    cycle.observe([Progressed("a", 2.0, 20.0, poisoned)])
    after = store.get("a")
    assert after.block_noise == measured and after.iterations_done == 20.0


def test_eta_is_online_once_every_block_is_measured_and_names_its_source() -> None:
    store, *_ = setup()
    job = submit(store, "a", workers=4, iterations=1000, at=0.0)
    plan = staircase(4, 4)
    assert job_eta(job, plan).source == "default"
    assert job_eta(job, full_backprop(4, 4)).eta == 1.0
    stats = tuple(
        BlockNoise(b, grad_sqr=0.5, grad_var=8.0, batch=32, observations=20, last_iteration=10,
                   contributors=4)
        for b in range(1, 5)
    )  # fmt: skip
    measured = replace(job, block_noise=stats)
    online = job_eta(measured, plan)
    assert online.source == "online"
    assert online.eta == pytest.approx(eta_for_plan(stats, plan, batch=32).eta)
    assert 0.25 < online.eta < 1.0
    # noisier blocks cost more: monotone in depth across the candidates
    by_label = {c.label: c.estimate.eta for c in candidate_etas(measured, 4)}
    assert by_label["none"] == 1.0
    assert by_label["uniform:1"] >= by_label["uniform:2"] >= by_label["uniform:3"]
    # too few observations: the prior answers
    thin = tuple(
        BlockNoise(b, 0.5, 8.0, 32, observations=3, last_iteration=10, contributors=4)
        for b in range(1, 5)
    )
    sparse = replace(measured, block_noise=thin)
    assert job_eta(sparse, plan).source == "default"
    assert SPBPlan((0, 1, 2, 3), 4) == plan


def test_the_jigsaw_policy_prices_plans_with_the_jobs_online_eta() -> None:
    """Policies read eta through the snapshot's jobs: once a job's gradient noise covers every
    block, the plan catalog prices its SPB plans with it instead of the model's figure."""
    from jigsaw.model.hardware import preset
    from jigsaw.oracle import Oracle
    from jigsaw.policies.shared.plans import PlanCatalog

    store, *_ = setup()
    job = submit(store, "a", workers=4, iterations=1000, at=0.0)
    job = replace(job, spec=replace(job.spec, model="resnet18_32"))
    oracle = Oracle(preset("v100"))
    catalog = PlanCatalog(
        oracle,
        eta_of=lambda model, plan: 0.99,
        planner=planner_for(oracle),
    )
    plan = staircase(4, 4)
    assert catalog.eta(job, plan) == 0.99  # no measurement yet: the model's figure
    noisy = tuple(
        BlockNoise(b, grad_sqr=0.01, grad_var=50.0, batch=32, observations=30,
                   last_iteration=100, contributors=4)
        for b in range(1, 5)
    )  # fmt: skip
    measured = replace(job, block_noise=noisy)
    online = job_eta(measured, plan).eta
    assert catalog.eta(measured, plan) == pytest.approx(online) and online < 0.9
    by_plan = {option.plan: option.eta for option in catalog.options(measured)}
    assert by_plan[plan] == pytest.approx(online)
    assert {option.plan: option.eta for option in catalog.options(job)}[plan] == 0.99
