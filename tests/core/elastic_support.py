"""Helpers shared by the core tests of elastic jobs: a scripted cycle on the in-memory store,
an elastic job, and a two-job Pollux trace replayed on 8 GPUs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jigsaw.model.cluster import Cluster, Placement
from jigsaw.model.decisions import Decision
from jigsaw.model.domain import Job, JobSpec, submitted_event
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.policies.base import PolicyBase
from jigsaw.scheduling.clock import VirtualClock
from jigsaw.scheduling.cycle import SchedulingCycle
from jigsaw.scheduling.memstore import InMemoryStore
from jigsaw.simulator import SimulationSetup, make_oracle

TWO: Placement = ((0, 0), (0, 1))
FOUR: Placement = ((0, 0), (0, 1), (0, 2), (0, 3))
ELASTIC = {
    "min_workers": 1,
    "max_workers": 4,
    "batch_policy": "adaptive",
    "min_global_batch": 16,
    "max_global_batch": 128,
}


class Scripted(PolicyBase):
    """Returns the decisions it was given, one list per round."""

    name = "scripted"
    periodic = True

    def __init__(self, rounds: list[list[Decision]]) -> None:
        self.rounds = rounds

    def decide(self, snapshot: Snapshot) -> list[Decision]:
        del snapshot
        return self.rounds.pop(0) if self.rounds else []


def elastic_job(store: InMemoryStore, iterations: int = 200) -> Job:
    spec = JobSpec(
        name="e", model="mlp", workers=2, iterations=iterations, batch_size=16, **ELASTIC
    )
    job = Job(id="e", spec=spec, submitted_at=0.0)
    return store.add(job, submitted_event(job, "test"))


def scripted_cycle(
    rounds: list[list[Decision]], executor: Any
) -> tuple[InMemoryStore, VirtualClock, SchedulingCycle]:
    store, clock = InMemoryStore(), VirtualClock()
    cluster = Cluster.uniform(8, 4)
    return store, clock, SchedulingCycle(store, executor, Scripted(rounds), clock, lambda: cluster)


APPS = Path(__file__).resolve().parents[1] / "data" / "pollux" / "apps"


def two_elastic_pollux_jobs(tmp_path: Path) -> tuple[Path, SimulationSetup, Oracle]:
    """Two elastic cifar10 jobs of Pollux's workloads (2 replicas at 0 s, 4 at 600 s) as a
    trace beside Pollux's apps, an 8-GPU setup that keeps its decision log, and its oracle."""
    root = tmp_path / "pollux"
    (root / "workloads").mkdir(parents=True)
    (root / "apps").symlink_to(APPS, target_is_directory=True)
    trace = root / "workloads" / "w.csv"
    trace.write_text(
        "name,time,application,num_replicas,batch_size\na,0,cifar10,2,256\nb,600,cifar10,4,512\n"
    )
    setup = SimulationSetup(gpus=8, gpus_per_node=4, keep_log=True)
    return trace, setup, make_oracle(setup)
