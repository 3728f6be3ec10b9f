"""The pollux policy: its exact size choice, its placement rules, and how it sizes jobs on a
small Pollux workload under Pollux's semantics."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest

from jigsaw.model.cluster import Cluster
from jigsaw.policies.shared.pollux_allocation import SizeCosts, choose_sizes
from jigsaw.policies.shared.pollux_placement import PackRequest, pack
from jigsaw.simulator import SimulationSetup, load_jobs, make_oracle, make_rates, replay
from jigsaw.simulator.replay_result import ReplayResult
from jigsaw.simulator.semantics import POLLUX

APPS = Path(__file__).resolve().parents[2] / "data" / "pollux" / "apps"
HEADER = "name,time,application,num_replicas,batch_size\n"


# -- sizes: exact where Pollux searches -------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_sizes_minimise_the_summed_cost_exactly(seed: int) -> None:
    rng = np.random.default_rng(seed)
    capacity = 7
    jobs = []
    for index in range(4):
        costs = rng.uniform(0.1, 10.0, size=capacity + 1)
        costs[rng.uniform(size=capacity + 1) < 0.3] = np.inf
        costs[0] = 50.0
        jobs.append(SizeCosts(f"j{index}", costs))
    chosen = choose_sizes(jobs, capacity)
    best = min(
        sum(job.costs[n] for job, n in zip(jobs, sizes, strict=True))
        for sizes in itertools.product(range(capacity + 1), repeat=len(jobs))
        if sum(sizes) <= capacity
    )
    assert sum(chosen.values()) <= capacity
    assert sum(job.costs[chosen[job.job_id]] for job in jobs) == pytest.approx(best)


# -- placement -------------------------------------------------------------------------------


def _node(index: int, count: int = 4) -> tuple[tuple[int, int], ...]:
    return tuple((index, gpu) for gpu in range(count))


def test_kept_sizes_keep_their_gpus_and_a_shrink_keeps_its_fullest_node() -> None:
    cluster = Cluster.uniform(16, 4)
    spanning = (*_node(0), (1, 0), (1, 1))
    placed = pack(
        [
            PackRequest("kept", 2, ((2, 0), (2, 1))),
            PackRequest("shrinks", 4, spanning),
            PackRequest("new", 4, ()),
        ],
        cluster,
    )
    assert placed["kept"] == ((2, 0), (2, 1))
    assert placed["shrinks"] == _node(0)
    assert len(placed["new"]) == 4 and len({gpu[0] for gpu in placed["new"]}) == 1


def test_two_jobs_on_one_gpu_are_never_both_kept_there() -> None:
    """A job sharing a GPU with an earlier one (time-sliced before, say) keeps no GPU of its
    own: it is placed afresh, and no GPU ends up under two exclusive jobs."""
    cluster = Cluster.uniform(8, 4)
    placed = pack(
        [PackRequest("first", 2, ((0, 0), (0, 1))), PackRequest("second", 1, ((0, 1),))],
        cluster,
    )
    assert placed["first"] == ((0, 0), (0, 1))
    assert len(placed["second"]) == 1 and placed["second"][0] not in placed["first"]


def test_a_growing_job_extends_on_its_node_or_falls_back_to_its_own_gpus() -> None:
    cluster = Cluster.uniform(8, 4)
    grown = pack([PackRequest("g", 4, ((1, 0), (1, 1)))], cluster)
    assert grown["g"] == _node(1)
    # Node 1's other GPUs are taken and 3 GPUs fit nowhere on one node: it stays as it was
    # rather than restart on the same number of GPUs elsewhere.
    blocked = pack(
        [
            PackRequest("other", 2, ((1, 2), (1, 3))),
            PackRequest("full", 4, _node(0)),
            PackRequest("g", 3, ((1, 0), (1, 1)), min_size=1),
        ],
        cluster,
    )
    assert blocked["g"] == ((1, 0), (1, 1))


def test_no_node_holds_two_jobs_that_span_nodes() -> None:
    cluster = Cluster.uniform(16, 4)
    placed = pack(
        [PackRequest("a", 6, ()), PackRequest("b", 6, ()), PackRequest("c", 3, ())], cluster
    )
    spans = [{gpu[0] for gpu in p} for p in placed.values() if len({gpu[0] for gpu in p}) > 1]
    assert len(spans) == 2
    assert not spans[0] & spans[1]
    # The 2 + 2 GPUs left are on the two spanned nodes: c may not span them, so it shrinks
    # to the 2 GPUs of one node.
    assert len(placed["c"]) == 2 and len({gpu[0] for gpu in placed["c"]}) == 1
    used = [gpu for p in placed.values() for gpu in p]
    assert len(used) == len(set(used)) == 14


# -- the policy on a small Pollux workload ---------------------------------------------------


def _replay(tmp_path: Path, rows: str, policy: str) -> ReplayResult:
    root = tmp_path / "pollux"
    (root / "workloads").mkdir(parents=True)
    (root / "apps").symlink_to(APPS, target_is_directory=True)
    trace = root / "workloads" / "w.csv"
    trace.write_text(HEADER + rows)
    setup = SimulationSetup(gpus=16, gpus_per_node=4, keep_log=True)
    oracle = make_oracle(setup)
    rates, arrivals = make_rates(load_jobs(trace, setup, oracle), setup, oracle, trace)
    return replay(arrivals, policy, rates, oracle, setup, semantics=POLLUX)


def _sizes(result: ReplayResult, job_id: str) -> list[tuple[float, int]]:
    """(time, GPUs) of every start and resize of ``job_id``."""
    sizes = []
    assert result.log.lines is not None
    for line in result.log.lines:
        at, kind, name = line.split(" ")[:3]
        if name == job_id and kind in ("start", "resize"):
            gpus = re.search(r"gpus=((?:\d+:\d+ ?)+)", line)
            assert gpus is not None
            sizes.append((float(at), len(gpus.group(1).split())))
    return sizes


ROWS = (
    "cifar10-0,0,cifar10,6,2048\n"
    + "".join(f"cifar10-{i},420,cifar10,4,2048\n" for i in (1, 2, 3))
    + "deepspeech2-4,420,deepspeech2,4,320\nncf-5,420,ncf,1,32768\n"
)


def test_pollux_grows_a_lone_job_and_shrinks_it_when_others_arrive(tmp_path: Path) -> None:
    result = _replay(tmp_path, ROWS, "pollux")
    assert result.summary["completed"] == 6
    sizes = _sizes(result, "cifar10-0")
    alone = [n for at, n in sizes if at < 420]
    # It starts on one GPU whatever it asked for, and at most doubles what it has measured.
    assert alone[0] == 1 and alone[-1] == 16
    assert all(b <= 2 * a for a, b in itertools.pairwise(alone))
    after = [n for at, n in sizes if at >= 420]
    assert after and after[0] < 16 and min(after) <= 4
    newcomers = [_sizes(result, f"cifar10-{i}")[0] for i in (1, 2, 3)]
    assert all(at == 480.0 and n == 1 for at, n in newcomers)  # the next 60 s boundary
    assert _sizes(result, "ncf-5") == [(480.0, 1)]  # rigid: Pollux keeps ncf on one GPU


def test_pollux_beats_the_tiresias_baseline_on_the_same_jobs(tmp_path: Path) -> None:
    las = _replay(tmp_path / "las", ROWS, "las").summary
    pollux = _replay(tmp_path / "pollux", ROWS, "pollux").summary
    assert las["resizes"] == 0 and pollux["resizes"] > 0
    assert pollux["avg_jct_s"] < 0.8 * las["avg_jct_s"]
