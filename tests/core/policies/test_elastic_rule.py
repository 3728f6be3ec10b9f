"""The simple elastic rule (jigsaw only): an elastic job grows into GPUs nobody waits for and
shrinks to min_workers when someone waits; fifo, las, maxmin and timeslice (co-tenancy alone)
run it at its initial size; the simulator replays the same decisions."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Preempt, Resize, Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.hardware import preset
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import SPBPlan, full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.planning.planner import Planner
from jigsaw.policies import create_policy
from jigsaw.policies.builder import build_policy
from jigsaw.policies.jigsaw_parts.elastic_rule import elastic_resizes, worker_batch
from jigsaw.simulator import load_jobs, make_rates, replay
from tests.core.elastic_support import two_elastic_pollux_jobs

FIXED = {"min_workers": 1, "max_workers": 4, "batch_size": 24}  # global batch 48 at 2


def running(job_id: str, gpus: int, node: int = 0, **spec: object) -> Job:
    values: dict[str, object] = {"model": "mlp", "workers": 2, "iterations": 100, **spec}
    placement = tuple((node, g) for g in range(gpus))
    return Job(
        id=job_id,
        spec=JobSpec(name=job_id, **values),  # type: ignore[arg-type]
        submitted_at=float(len(job_id)),
        state=JobState.RUNNING,
        placement=placement,
        plan=full_backprop(gpus, 4),
        run_started_at=0.0,
    )


def waiting(job_id: str, workers: int) -> Job:
    spec = JobSpec(name=job_id, model="mlp", workers=workers, iterations=10)
    return Job(id=job_id, spec=spec, submitted_at=10.0)


def snapshot(*jobs: Job, gpus: int = 8) -> Snapshot:
    return Snapshot.build(100.0, Cluster.uniform(gpus, 4), jobs)


def test_an_elastic_job_grows_into_free_gpus_up_to_max_workers_keeping_its_batch() -> None:
    (resize,) = elastic_resizes(snapshot(running("e", 2, **FIXED)), [])
    assert isinstance(resize, Resize)
    assert len(resize.placement) == 4 and resize.placement[:2] == ((0, 0), (0, 1))
    assert resize.plan == full_backprop(4, 4) and resize.worker_batch == 12  # 48 / 4
    assert "2 -> 4 workers into GPUs nobody waits for" in resize.reason


def test_it_shrinks_to_min_workers_when_a_job_that_fits_waits() -> None:
    grown = running("e", 4, **FIXED)
    (resize,) = elastic_resizes(snapshot(grown, waiting("w", 2), gpus=4), [])
    assert isinstance(resize, Resize)
    assert resize.placement == ((0, 0),) and resize.worker_batch == 48
    assert "1 job(s) wait, w first: back to min_workers" in resize.reason
    # A job no cluster could hold is not waiting for these GPUs; a started one waits no more.
    assert elastic_resizes(snapshot(grown, waiting("huge", 9), gpus=8), []) == []
    start = Start("w", ((0, 4), (0, 5)), full_backprop(2, 4), "fits")
    assert elastic_resizes(snapshot(grown, waiting("w", 2), gpus=6), [start]) == []


def test_only_running_elastic_full_backprop_jobs_undecided_this_round_are_resized() -> None:
    rigid = running("r", 2)
    admitted = replace(running("a", 2, **FIXED), state=JobState.ADMITTED)
    hosting = replace(running("h", 2, **FIXED), plan=SPBPlan((0, 1), 4))
    assert elastic_resizes(snapshot(rigid, admitted, hosting), []) == []
    elastic = running("e", 2, **FIXED)
    decided = Preempt("e", "")  # any decision about it this round
    assert elastic_resizes(snapshot(elastic), [decided]) == []


def test_free_gpus_go_to_elastic_jobs_in_arrival_order() -> None:
    first, second = running("e", 2, **FIXED), running("ee", 2, node=1, **FIXED)
    resizes = elastic_resizes(snapshot(first, second, gpus=6), [])
    assert [(r.job_id, len(r.placement)) for r in resizes] == [("e", 4)]


def test_an_adaptive_batch_stays_within_its_bounds() -> None:
    bounds = {"batch_policy": "adaptive", "min_global_batch": 32, "max_global_batch": 64}
    job = running("e", 2, **{**FIXED, **bounds})
    assert worker_batch(job, 4) == 12  # global 48 kept
    assert worker_batch(replace(job, worker_batch=20), 4) == 10  # the current global, 40
    assert worker_batch(replace(job, worker_batch=32), 1) == 64  # 64 at one worker
    assert worker_batch(replace(job, worker_batch=16), 3) == 11  # 33: at least 32
    tight = {"batch_policy": "adaptive", "min_global_batch": 41, "max_global_batch": 43}
    # No global batch in 41..43 splits over 4 workers: such bounds are refused at submit.
    with pytest.raises(InvalidSpecError, match="raise max_global_batch to 44"):
        running("t", 2, batch_size=21, max_workers=4, **tight)


@pytest.mark.parametrize("policy", ["fifo", "las", "maxmin", "timeslice"])
def test_other_policies_run_elastic_jobs_at_their_initial_size(policy: str) -> None:
    decisions = create_policy(policy, planner=Planner()).decide(snapshot(running("e", 2, **FIXED)))
    assert not any(isinstance(d, Resize) for d in decisions)


def test_jigsaw_decides_the_rule_after_its_own_round() -> None:
    unpriced = {"config": {"resize_priced": False}}  # priced: test_priced_elastic_rule.py
    policy = build_policy("jigsaw", Oracle(preset("v100")), unpriced)
    decisions = policy.decide(snapshot(running("e", 2, **FIXED)))
    assert [type(d).__name__ for d in decisions] == ["Resize"]


def test_jigsaw_with_resize_off_keeps_elastic_jobs_at_their_size() -> None:
    """The ablation row ``{"jigsaw": {"resize": false}}``: the same round, no Resize, and the
    simulator is not asked to hold a round after an elastic start."""
    policy = build_policy("jigsaw", Oracle(preset("v100")), {"config": {"resize": False}})
    assert policy.decide(snapshot(running("e", 2, **FIXED))) == []
    assert policy.sizes_elastic_jobs is False
    assert build_policy("jigsaw", Oracle(preset("v100"))).sizes_elastic_jobs is True


def test_the_simulator_replays_elastic_jobs_with_the_same_decisions(tmp_path: Path) -> None:
    """Two elastic Pollux jobs on 8 GPUs: the first grows at the round after it is up, gives
    up the 4 GPUs the second needs when it arrives (the priced rule; unpriced it shrank to one
    worker and grew back), and the second starts on them at the next round and grows into
    everything once the first is done. las never resizes; the replay is deterministic."""
    trace, setup, oracle = two_elastic_pollux_jobs(tmp_path)

    def run(policy: str) -> list[str]:
        rates, arrivals = make_rates(load_jobs(trace, setup, oracle), setup, oracle, trace)
        result = replay(arrivals, policy, rates, oracle, setup)
        assert all(j.state == JobState.SUCCEEDED for j in result.store.all_jobs())
        assert result.log.lines is not None
        return result.log.lines

    lines = run("jigsaw")
    resizes = [line.split(" (")[0].split() for line in lines if " resize " in line]
    sizes = [(words[0], words[2], len(words) - 5) for words in resizes]  # at, job, GPUs
    assert sizes[:2] == [("60.000", "a", 8), ("600.000", "a", 4)], sizes
    assert sizes[2][1:] == ("b", 8) and len(sizes) == 3  # b grows once a is done
    assert " start b " in lines[3]  # on the GPUs the shrink freed
    assert run("jigsaw") == lines
    assert not [line for line in run("las") if " resize " in line]
