"""``timeslice`` (Gandiva-style): a waiting one-GPU job takes turns on a GPU of a running
gang that runs full backprop; nobody switches plan. When it packs and when it does not."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from jigsaw.model.cluster import Cluster, GpuId
from jigsaw.model.decisions import Decision, Replan, Start
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import SPBPlan, full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies import policy_names
from jigsaw.policies.builder import build_policy
from jigsaw.policies.options import policy_options
from jigsaw.policies.timeslice import TimesliceConfig, TimeslicePolicy
from jigsaw.simulator import SimulationSetup, make_oracle
from tests.core.support import planner_for, running_job

NOW = 3_600.0


def _timeslice(oracle: Oracle, **options: Any) -> TimeslicePolicy:
    return TimeslicePolicy(oracle, planner=planner_for(oracle), **options)


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return make_oracle(SimulationSetup())


def _planner(oracle: Oracle) -> Planner:
    return Planner(oracle.hardware, catalog=ModelCatalog(oracle.profiles))


def _running(oracle: Oracle, job_id: str, model: str, gpus: tuple[GpuId, ...], work: int) -> Job:
    spec = JobSpec(job_id, model, len(gpus), work, batch_size=32)
    return running_job(spec, gpus, full_backprop(len(gpus), oracle.num_blocks(model)), NOW)


def _guest(work: int = 2_000, model: str = "resnet18_32") -> Job:
    return Job("guest", JobSpec("guest", model, 1, work, batch_size=32), submitted_at=NOW - 9)


def _two_node_gang(oracle: Oracle, work: int = 1_000_000) -> Job:
    """An 8-worker gang over two 4-GPU nodes: its all-reduce crosses the network, so each
    worker leaves its GPU idle part of every iteration."""
    return _running(
        oracle, "host", "resnet50_32", tuple((n, g) for n in (0, 1) for g in range(4)), work
    )


def _cluster(oracle: Oracle, gpus: int = 8, memory: int | None = None) -> Cluster:
    return Cluster.uniform(
        gpus, 4, gpu_memory_bytes=memory if memory is not None else oracle.hardware.memory_bytes
    )


def _starts(decisions: list[Decision]) -> list[Start]:
    return [d for d in decisions if isinstance(d, Start)]


def test_a_waiting_one_gpu_job_takes_turns_with_a_full_backprop_gang(oracle: Oracle) -> None:
    host = _two_node_gang(oracle)
    snapshot = Snapshot(NOW, _cluster(oracle), (_guest(),), (host,))
    decisions = _timeslice(oracle).decide(snapshot)
    assert not [d for d in decisions if isinstance(d, Replan)]  # the host keeps its plan
    (start,) = _starts(decisions)
    assert start.job_id == "guest"
    assert start.placement[0] in host.placement
    assert "time-sliced with host (plan none)" in start.reason
    assert not isinstance(start.plan, SPBPlan) or start.plan.is_full_backprop


def test_a_free_gpu_comes_first(oracle: Oracle) -> None:
    host = _running(oracle, "host", "resnet50_32", ((0, 0), (0, 1), (0, 2), (0, 3)), 1_000_000)
    snapshot = Snapshot(NOW, _cluster(oracle), (_guest(),), (host,))
    (start,) = _starts(_timeslice(oracle).decide(snapshot))
    assert start.placement[0][0] == 1  # the empty node, not the gang's
    assert "exclusive" in start.reason


def test_jigsaw_bar_stops_a_turn_that_gains_less(oracle: Oracle) -> None:
    """The gang's idle time is worth about 0.1 of a job's goodput: above timeslice's bar (0),
    below jigsaw's (0.25)."""
    host = _two_node_gang(oracle)
    snapshot = Snapshot(NOW, _cluster(oracle), (_guest(),), (host,))
    assert _timeslice(oracle, config=TimesliceConfig(pack_gain=0.25)).decide(snapshot) == []


def test_a_guest_longer_than_its_host_has_left_waits(oracle: Oracle) -> None:
    """Two one-worker jobs that keep their GPU busy would share it like a processor-sharing
    queue: the completion guard lets in a guest shorter than the host's remaining work only."""
    host = _running(oracle, "host", "resnet18_32", ((0, 0),), 200_000)
    cluster = _cluster(oracle, gpus=1)
    short = Snapshot(NOW, cluster, (_guest(work=2_000),), (host,))
    assert [s.job_id for s in _starts(_timeslice(oracle).decide(short))] == ["guest"]
    long = Snapshot(NOW, cluster, (_guest(work=2_000_000),), (host,))
    assert _timeslice(oracle).decide(long) == []
    unguarded = _timeslice(oracle, config=TimesliceConfig(completion_guard=False))
    assert [s.job_id for s in _starts(unguarded.decide(long))] == ["guest"]


def test_no_turns_where_memory_does_not_fit(oracle: Oracle) -> None:
    host = _two_node_gang(oracle)
    probe = _timeslice(oracle)
    host_memory = probe.catalog.footprint(host, host.plan, host.placement)[0][2]
    guest_memory = probe.catalog.default_option(_guest()).memories[0]
    tight = _cluster(oracle, memory=host_memory + guest_memory - 1)
    assert _timeslice(oracle).decide(Snapshot(NOW, tight, (_guest(),), (host,))) == []
    roomy = _cluster(oracle, memory=host_memory + guest_memory)
    assert _starts(_timeslice(oracle).decide(Snapshot(NOW, roomy, (_guest(),), (host,))))


def test_one_guest_per_gpu(oracle: Oracle) -> None:
    host = _two_node_gang(oracle)
    guests = tuple(
        replace(_guest(), id=f"g{i}", spec=replace(_guest().spec, name=f"g{i}")) for i in range(10)
    )
    starts = _starts(_timeslice(oracle).decide(Snapshot(NOW, _cluster(oracle), guests, (host,))))
    gpus = [s.placement[0] for s in starts]
    assert len(gpus) == len(set(gpus)) >= 2
    assert set(gpus) <= set(host.placement)


def test_no_spb_plan_is_ever_chosen(oracle: Oracle) -> None:
    """On an empty cluster jigsaw gives a 4-worker auto gang its best plan; timeslice only
    ever offers full backprop."""
    spec = JobSpec("gang", "resnet50_32", 4, 10_000, batch_size=32)
    policy = _timeslice(oracle)
    assert all(
        o.is_full_backprop for o in policy.catalog.options(Job("gang", spec, submitted_at=0))
    )


def test_registered_and_built_from_json_options(oracle: Oracle) -> None:
    assert "timeslice" in policy_names()
    built = build_policy(
        "timeslice", oracle, {"config": {"pack_gain": 0.5, "las": {"promote_knob": 2}}}
    )
    assert isinstance(built, TimeslicePolicy)
    assert built.config == TimesliceConfig(
        pack_gain=0.5, las=replace(TimesliceConfig().las, promote_knob=2)
    )
    with pytest.raises(InvalidSpecError, match="'timeslice' has no option 'spb'"):
        policy_options("timeslice", {"spb": False})
