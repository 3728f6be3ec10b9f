"""las on kept state (:func:`kept_gang_round`) decides, round after round, what las ranking and
walking afresh decides (``incremental=False``: :func:`las_order` and :func:`gang_round`).

A random world on a small cluster follows the kept policy's own decisions, but not all of
them and not only them, as a real cluster does: most starts and preemptions take effect
(some starts stay admitted a while), gangs finish, queued jobs get cancelled or their
priority edited, jobs arrive, time runs on, and once a node is lost. Tight LAS thresholds and
a short protection make keys cross and gangs turn preemptible often; the reservation is
tried on and off. Whenever a round decides nothing, the stability bounds must agree too.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.model.decisions import Decision, Preempt, Start
from jigsaw.model.domain import Job, JobSpec, transition
from jigsaw.model.hardware import preset
from jigsaw.model.lifecycle import JobState
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies.las import LasPolicy
from jigsaw.policies.shared.fairness import LasConfig
from jigsaw.policies.speed import sided_ranking
from jigsaw.policies.speed.running_gangs import RunningGangs

ORACLE = Oracle(preset("v100"))
PLANNER = Planner(ORACLE.hardware, catalog=ModelCatalog(ORACLE.profiles))
TIGHT = LasConfig(thresholds=(600.0, 6_000.0), promote_knob=2.0, promote_floor_s=900.0)
CASES = {
    "defaults": {},
    "tight": {"config": TIGHT, "min_run_s": 300.0},
    "tight-no-reservation": {"config": TIGHT, "min_run_s": 300.0, "reserve": False},
}


def _apply(jobs: dict[str, Job], decisions: list[Decision], now: float, rng: random.Random) -> None:
    for decision in decisions:
        job = jobs.get(decision.job_id)
        if job is None or rng.random() < 0.1:
            continue  # gone meanwhile, or the executor has not got to it
        if isinstance(decision, Start) and job.state.is_waiting:
            job, _ = transition(
                job,
                JobState.ADMITTED,
                reason="t",
                at=now,
                actor="t",
                placement=decision.placement,
                plan=decision.plan,
            )
            if rng.random() < 0.9:
                job, _ = transition(job, JobState.RUNNING, reason="t", at=now, actor="t")
        elif isinstance(decision, Preempt) and job.state is JobState.RUNNING:
            job, _ = transition(job, JobState.PREEMPTED, reason="t", at=now, actor="t")
        jobs[job.id] = job


def _churn(jobs: dict[str, Job], now: float, made: int, rng: random.Random) -> int:
    """Arrivals, gangs coming up, finishes, cancellations and priority edits; returns the
    jobs made so far."""
    for job_id, job in list(jobs.items()):
        if job.state is JobState.ADMITTED and rng.random() < 0.5:
            jobs[job_id] = transition(job, JobState.RUNNING, reason="t", at=now, actor="t")[0]
    for _ in range(rng.choice([0, 0, 1, 1, 2, 4])):
        made += 1
        spec = JobSpec(
            name=f"j{made}",
            model="resnet18_32",
            workers=rng.choice([1, 1, 1, 2, 2, 3, 4, 8]),
            iterations=1_000,
            priority=rng.choice([0, 0, 0, 0, 1, -1]),
        )
        jobs[f"j{made}"] = Job(id=f"j{made}", spec=spec, submitted_at=now - rng.random() * 5)
    for job_id in rng.sample(sorted(jobs), k=min(len(jobs), rng.randint(0, 2))):
        job = jobs[job_id]
        action = rng.random()
        if action < 0.5 and job.state is JobState.RUNNING:
            del jobs[job_id]  # finished
        elif action < 0.6:
            del jobs[job_id]  # cancelled, wherever it was
        elif action < 0.7:
            spec = replace(job.spec, priority=rng.choice([-1, 0, 2]))
            jobs[job_id] = replace(job, spec=spec, version=job.version + 1)
    return made


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_kept_round_decides_as_ranking_and_walking_afresh(case: str, seed: int) -> None:
    rng = random.Random(seed)
    options = CASES[case]
    kept = LasPolicy(PLANNER, **options)  # type: ignore[arg-type]
    afresh = LasPolicy(PLANNER, incremental=False, **options)  # type: ignore[arg-type]
    cluster = Cluster.uniform(24, 4)
    jobs: dict[str, Job] = {}
    now, made, decided, preempted = 0.0, 0, 0, 0
    decisions: list[Decision] = []
    for step in range(300):
        now += rng.choice([1.0, 60.0, 60.0, 60.0, 300.0, 1_000.0 * rng.random()])
        _apply(jobs, decisions, now, rng)
        made = _churn(jobs, now, made, rng)
        if step == 150:
            cluster = cluster.without_node(2)  # a new cluster object: the kept state starts over
        snapshot = Snapshot.build(now, cluster, list(jobs.values()))
        decisions = kept.decide(snapshot)
        assert decisions == afresh.decide(snapshot)
        if not decisions:
            assert kept.stable_until(snapshot) == afresh.stable_until(snapshot)
        decided += len(decisions)
        preempted += sum(isinstance(decision, Preempt) for decision in decisions)
    assert decided > 100 and preempted > 10


@pytest.mark.parametrize(
    ("now", "min_run_s", "started"),
    [
        (2020.2761029576868, 7.3, 2012.9761029576869),  # protected, though not > now - min_run_s
        (1923.466166163937, 1800.0, 123.46616616393705),  # > now - min_run_s, not protected
    ],
)
def test_protection_is_the_reference_test_at_the_last_ulp(
    now: float, min_run_s: float, started: float
) -> None:
    """The kept gangs find the protected ones by bisecting on ``now - min_run_s``; float
    subtraction rounds, so at the edge the reference's ``now - started < min_run_s`` decides."""
    cluster = Cluster.uniform(4, 4)
    spec = JobSpec(name="a", model="resnet18_32", workers=1, iterations=10)
    job, _ = transition(
        Job(id="a", spec=spec, submitted_at=0.0),
        JobState.ADMITTED,
        reason="t",
        at=started,
        actor="t",
        placement=((0, 0),),
        plan=PLANNER.start_plan(Job(id="a", spec=spec, submitted_at=0.0)),
    )
    job, _ = transition(job, JobState.RUNNING, reason="t", at=started, actor="t")
    gangs = RunningGangs(cluster)
    gangs.update([job], [])
    protected = now - started < min_run_s
    assert gangs.protected(now, min_run_s) == ({"a"} if protected else set(), int(protected))


def test_a_round_that_raises_while_fixing_up_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ranking and the gangs are fixed up from one diff; when fixing up raises halfway
    (a job whose key cannot be computed), the next rounds must not build on the half: here
    the queue's raised priorities, taken in by nobody, must still preempt."""
    rng = random.Random(7)
    options = CASES["tight"]
    kept = LasPolicy(PLANNER, **options)  # type: ignore[arg-type]
    afresh = LasPolicy(PLANNER, incremental=False, **options)  # type: ignore[arg-type]
    cluster = Cluster.uniform(8, 4)
    jobs: dict[str, Job] = {}
    now, made = 0.0, 0
    decisions: list[Decision] = []
    snapshot = Snapshot.build(now, cluster, [])
    while now < 1_200.0 or len(snapshot.running) < 2 or len(snapshot.waiting) < 2:
        now += 60.0
        _apply(jobs, decisions, now, rng)
        made = _churn(jobs, now, made, rng)
        snapshot = Snapshot.build(now, cluster, list(jobs.values()))
        decisions = kept.decide(snapshot)
    _apply(jobs, decisions, now, rng)
    for job_id, job in list(jobs.items()):  # every queued job now outranks every gang
        if job.state.is_waiting:
            spec = replace(job.spec, priority=5)
            jobs[job_id] = replace(job, spec=spec, version=job.version + 1)

    def no_key(job: Job, now: float, config: LasConfig) -> object:
        raise RuntimeError(f"no key for {job.id}")

    monkeypatch.setattr(sided_ranking, "key_and_due", no_key)
    now += 600.0
    with pytest.raises(RuntimeError):  # stable_until takes the snapshot in as decide does
        kept.stable_until(Snapshot.build(now, cluster, list(jobs.values())))
    monkeypatch.undo()
    preempted = 0
    for _ in range(5):
        now += 60.0
        snapshot = Snapshot.build(now, cluster, list(jobs.values()))
        decisions = kept.decide(snapshot)
        assert decisions == afresh.decide(snapshot)
        preempted += sum(isinstance(decision, Preempt) for decision in decisions)
        _apply(jobs, decisions, now, rng)
    assert preempted
