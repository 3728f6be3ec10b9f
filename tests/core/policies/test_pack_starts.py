""":func:`pack_starts` is :func:`pack` for a round where every gang keeps exactly the GPUs it
holds and the other jobs hold none: on random clusters, holdings (some gangs spanning nodes)
and starts of every size, the starts get the same GPUs."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from jigsaw.model.cluster import Cluster, GpuId, Placement
from jigsaw.policies.shared.pollux_placement import PackRequest, pack, pack_starts

_SIZES = [1, 1, 1, 2, 2, 3, 4, 6, 8, 12, 16]


def _holdings(cluster: Cluster, rng: random.Random, count: int) -> list[Placement]:
    """Up to ``count`` gangs on distinct alive GPUs: most on one node, some over two."""
    free = {node.index: list(node.gpu_ids()) for node in cluster.alive_nodes}
    found: list[Placement] = []
    for _ in range(count):
        open_nodes = [node for node, gpus in free.items() if gpus]
        if not open_nodes:
            break
        spread = rng.sample(open_nodes, min(len(open_nodes), rng.choice([1, 1, 1, 2])))
        gpus: list[GpuId] = []
        for node in spread:
            take = rng.randint(1, len(free[node]))
            gpus.extend(free[node][:take])
            del free[node][:take]
        found.append(tuple(sorted(gpus)))
    return found


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    nodes=st.integers(1, 8),
    per_node=st.sampled_from([2, 4, 8]),
    held=st.integers(0, 12),
    starting=st.integers(0, 10),
)
def test_the_starts_get_the_gpus_pack_gives_them(
    seed: int, nodes: int, per_node: int, held: int, starting: int
) -> None:
    rng = random.Random(seed)
    cluster = Cluster.uniform(nodes * per_node, per_node)
    kept = _holdings(cluster, rng, held)
    starts = [
        PackRequest(f"s{index:02d}", size, (), rng.choice([size, 1, max(size // 2, 1)]))
        for index, size in enumerate(rng.choice(_SIZES) for _ in range(starting))
    ]
    gangs = [PackRequest(f"k{index:02d}", len(gpus), gpus) for index, gpus in enumerate(kept)]
    requests = [*gangs, *starts]
    rng.shuffle(requests)
    whole = pack(requests, cluster)
    assert all(whole[gang.job_id] == gang.current for gang in gangs)
    want = {r.job_id: whole[r.job_id] for r in starts}
    assert pack_starts(kept, starts, cluster) == want
    taken = {gpu for gpus in kept for gpu in gpus}  # as the round hands it over
    assert pack_starts(kept, starts, cluster, taken) == want


def test_a_start_that_fits_nowhere_waits_and_the_next_spans_the_free_gpus() -> None:
    cluster = Cluster.uniform(8, 4)
    kept: list[Placement] = [((0, 0), (0, 1), (0, 2)), ((1, 0),)]
    starts = [PackRequest("big", 8, (), 8), PackRequest("four", 4, (), 1)]
    placed = pack_starts(kept, starts, cluster)
    assert placed == {"big": (), "four": ((0, 3), (1, 1), (1, 2), (1, 3))}
    gangs = [PackRequest(f"k{i}", len(gpus), gpus) for i, gpus in enumerate(kept)]
    whole = pack([*gangs, *starts], cluster)
    assert {name: whole[name] for name in placed} == placed
