"""The priced elastic rule: a resize costs its measured seconds (else a prior from the model's
checkpoint), so a job grows only when the time it saves pays for that, shrinks only when what
the waiters gain pays for what it loses, and is not resized again within its hold."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Resize, Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.hardware import preset
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.policies.jigsaw_parts.elastic_rule import elastic_resizes
from jigsaw.policies.jigsaw_parts.resize_cost import ResizeCostPrior, ResizeCosts
from jigsaw.policies.jigsaw_parts.resize_pricing import PricingTerms, ResizePricing
from jigsaw.scheduling.clock import VirtualClock
from jigsaw.scheduling.lease_facts import measured_resize
from jigsaw.simulator import load_jobs, make_rates, replay
from jigsaw.simulator.rate_executor import ConstantRate
from jigsaw.simulator.rates import OverheadModel
from jigsaw.simulator.replay_executor import ReplayExecutor
from tests.core.elastic_support import (
    FOUR,
    TWO,
    elastic_job,
    scripted_cycle,
    two_elastic_pollux_jobs,
)

ORACLE = Oracle(preset("v100"))
MODEL = "resnet50_224"  # 3.85 it/s on 2 V100s at 96 each, 6.86 on 4 at 48: growing pays
NOW = 1_000.0


def pricing(**terms: float) -> ResizePricing:
    return ResizePricing(ORACLE, ResizeCosts(ORACLE, ResizeCostPrior()), PricingTerms(**terms))


def running(job_id: str, gpus: int, iterations: int, node: int = 0, **fields: object) -> Job:
    spec = JobSpec(
        name=job_id,
        model=MODEL,
        workers=2,
        min_workers=1,
        max_workers=4,
        batch_size=96,
        iterations=iterations,
    )
    return Job(
        id=job_id,
        spec=spec,
        submitted_at=float(len(job_id)),
        state=JobState.RUNNING,
        placement=tuple((node, g) for g in range(gpus)),
        plan=full_backprop(gpus, ORACLE.num_blocks(MODEL)),
        run_started_at=0.0,
        worker_batch=192 // gpus,
        **fields,  # type: ignore[arg-type]
    )


def waiting(job_id: str, workers: int) -> Job:
    spec = JobSpec(name=job_id, model="mlp", workers=workers, iterations=10)
    return Job(id=job_id, spec=spec, submitted_at=10.0)


def resizes(*jobs: Job, gpus: int = 4, rule: ResizePricing | None = None) -> list[Resize]:
    found = elastic_resizes(
        Snapshot.build(NOW, Cluster.uniform(gpus, 4), jobs), [], rule or pricing()
    )
    assert all(isinstance(r, Resize) for r in found)
    return [r for r in found if isinstance(r, Resize)]


def test_the_prior_prices_the_checkpoint_and_a_control_interval_above_the_floor() -> None:
    costs = ResizeCosts(ORACLE, ResizeCostPrior(floor_s=10.0, s_per_gb=100.0, control_iterations=5))
    params = ORACLE.profiles.get(MODEL).param_bytes
    assert costs.checkpoint_bytes(MODEL) == 2 * params  # weights and SGD's momentum
    job = running("e", 2, 10_000)
    assert costs.estimate_s(job, 0.5) == pytest.approx(10.0 + 100.0 * 2 * params / 1e9 + 2.5)
    assert costs.checkpoint_bytes("no-such-model") == 0.0  # the floor alone prices it
    # The job's own measured resize first, else the last one measured on its model.
    other = replace(running("o", 2, 10_000), resize_s=70.0, resized_at=100.0)
    seen = costs.seeing([other])
    assert seen.estimate_s(job, 0.5) == 70.0
    assert seen.estimate_s(replace(job, resize_s=25.0), 0.5) == 25.0
    assert costs.estimate_s(job, 0.5) != 70.0  # seeing jobs changes no estimate in place
    # Of two measured on the model, the one that ended last.
    later = replace(running("l", 2, 10_000), resize_s=40.0, resized_at=200.0)
    assert costs.seeing([later, other]).estimate_s(job, 0.5) == 40.0


def test_a_job_grows_when_the_time_it_saves_pays_for_the_resize() -> None:
    (grow,) = resizes(running("e", 2, 10_000))  # ~2,600 s left at 2 workers, ~1,460 s at 4
    assert len(grow.placement) == 4 and grow.worker_batch == 48
    assert "2 -> 4 workers into GPUs nobody waits for" in grow.reason


def test_a_nearly_done_job_or_a_costly_resize_does_not_grow() -> None:
    assert resizes(running("e", 2, 10_000, iterations_done=9_900.0)) == []  # 26 s left
    # ~1,140 s saved pays twice a measured 500 s resize, not twice 1,000 s.
    assert resizes(running("e", 2, 10_000, resize_s=1_000.0)) == []
    assert len(resizes(running("e", 2, 10_000, resize_s=500.0))[0].placement) == 4
    # Nor does a resize measured on another job of the same model.
    costly = running("c", 2, 10_000, node=1, resize_s=1_000.0, resized_at=0.0)
    assert resizes(running("e", 2, 10_000), costly, gpus=8, rule=pricing()) == []


def test_a_resized_job_holds_its_size_for_a_few_times_the_resize_cost() -> None:
    recent = running("e", 2, 10_000, resize_s=30.0, resized_at=NOW - 100.0)  # hold: 120 s
    assert resizes(recent) == []
    assert len(resizes(replace(recent, resized_at=NOW - 121.0))[0].placement) == 4
    assert resizes(recent, rule=pricing(hold=3.0))  # a shorter hold has passed


def test_it_gives_up_what_a_waiter_needs_only_when_what_the_waiter_gains_pays() -> None:
    grown = running("e", 4, 10_000)  # ~1,460 s left at 4: the waiter would wait that long
    (shrink,) = resizes(grown, waiting("w", 2))
    assert shrink.placement == grown.placement[:2] and shrink.worker_batch == 96
    assert "4 -> 2 workers 1 job(s) wait, w first: down to what they need" in shrink.reason
    (to_min,) = resizes(grown, waiting("w", 3))
    assert len(to_min.placement) == 1 and to_min.worker_batch == 192
    assert "4 -> 1 workers 1 job(s) wait, w first: back to min_workers" in to_min.reason
    nearly_done = replace(grown, iterations_done=9_950.0)  # the waiter waits ~7 s
    assert resizes(nearly_done, waiting("w", 2)) == []
    # A waiter the freed GPUs cannot start gains nothing (the unpriced rule shrinks anyway).
    keeps_three = replace(grown, spec=replace(grown.spec, min_workers=3, workers=3))
    assert resizes(keeps_three, waiting("w", 2)) == []
    unpriced = Snapshot.build(NOW, Cluster.uniform(4, 4), [keeps_three, waiting("w", 2)])
    assert len(elastic_resizes(unpriced, [])) == 1


def test_only_as_many_jobs_shrink_as_the_waiters_need_and_nothing_grows_meanwhile() -> None:
    first, second = running("e", 4, 10_000), running("ee", 4, 10_000, node=1)
    (shrink,) = resizes(first, second, waiting("w", 2), gpus=8)
    assert shrink.job_id == "e"
    both = resizes(first, second, waiting("w", 2), waiting("ww", 3), gpus=8)
    assert [(r.job_id, len(r.placement)) for r in both] == [("e", 2), ("ee", 1)]
    # Free GPUs are not grown into while a job waits for more than they and a shrink hold.
    assert resizes(running("e", 2, 10_000), waiting("w", 4), gpus=4) == []
    (shrink,) = resizes(running("e", 2, 10_000), waiting("w", 3), gpus=4)
    assert len(shrink.placement) == 1  # 2 free and 1 freed start it


def test_grow_and_shrink_do_not_flap_round_after_round() -> None:
    """A job grows, a waiter arrives at once: the hold keeps the grown size for 4 x the cost
    measured; once past it the shrink pays, and the shrunk job does not grow back within its
    hold when the GPUs free again."""
    grown = running("e", 4, 10_000, resize_s=40.0, resized_at=NOW - 10.0)
    assert resizes(grown, waiting("w", 2)) == []
    assert resizes(replace(grown, resized_at=NOW - 200.0), waiting("w", 2))
    shrunk = running("e", 1, 10_000, resize_s=40.0, resized_at=NOW - 100.0)
    assert resizes(shrunk) == []
    assert len(resizes(replace(shrunk, resized_at=NOW - 161.0))[0].placement) == 4


def test_the_cycle_measures_a_resize_from_the_new_gangs_started_report_once() -> None:
    executor = ReplayExecutor(ConstantRate(10.0), OverheadModel(restart_s=30.0), VirtualClock())
    start = Start("e", TWO, full_backprop(2, 1), "go", worker_batch=16)
    grow = Resize("e", FOUR, full_backprop(4, 1), 8, "grow")
    store, clock, cycle = scripted_cycle([[start], [grow]], executor)
    elastic_job(store, iterations=10_000)
    cycle.run_once()  # t=0: started, up at once (no launch overhead)
    clock.advance_to(10.0)
    cycle.run_once()  # resized: the new gang is up at 40 s
    assert (store.get("e").resized_at, store.get("e").resize_s) == (10.0, None)
    clock.advance_to(40.0)
    cycle.run_once()
    assert store.get("e").resize_s == 30.0  # what the replay charged, measured as on Ray
    job = running("e", 4, 10_000, resized_at=500.0)
    assert measured_resize(job, 530.0) == 30.0
    assert measured_resize(replace(job, resize_s=30.0), 900.0) is None  # measured already
    assert measured_resize(replace(job, resized_at=None), 530.0) is None  # never resized


def test_the_simulator_charges_the_resize_it_prices(tmp_path: Path) -> None:
    """Replayed, every resize's measured seconds are the restart the replay charges, the
    figure the rule prices from then on."""
    trace, setup, oracle = two_elastic_pollux_jobs(tmp_path)
    rates, arrivals = make_rates(load_jobs(trace, setup, oracle), setup, oracle, trace)
    result = replay(arrivals, "jigsaw", rates, oracle, setup)
    assert result.log.lines is not None
    assert any(" resize " in line for line in result.log.lines)
    measured = {job.id: job.resize_s for job in result.store.all_jobs()}
    assert set(measured.values()) == {setup.overheads.restart_s}, measured
