"""The GPU ledger's shortcuts answer exactly what the long way would: a remembered failed
packing search, and fitting a new footprint in place of a booked one."""

from __future__ import annotations

import random

from jigsaw.model.cluster import Cluster
from jigsaw.policies.shared.packing import GpuLedger

GIB = 2**30


def random_ledger(rng: random.Random, cluster: Cluster) -> GpuLedger:
    ledger = GpuLedger(cluster, threshold=1.0, min_residual=0.2)
    for gpu in cluster.gpu_ids():
        for _ in range(rng.choice((0, 0, 1, 1, 2))):
            ledger.add(gpu, rng.choice((0.1, 0.3, 0.35, 0.6, 0.7)), rng.choice((1, 3, 6)) * GIB)
    return ledger


def test_fits_instead_agrees_with_removing_then_fitting() -> None:
    rng = random.Random(7)
    cluster = Cluster.uniform(16, 4)
    gpus = list(cluster.gpu_ids())
    disagreements = checked = 0
    for _ in range(400):
        ledger = random_ledger(rng, cluster)
        placed = rng.sample(gpus, 3)
        old = tuple((gpu, rng.choice((0.3, 0.6, 1.0)), rng.choice((2, 4)) * GIB) for gpu in placed)
        ledger.add_all(old)
        new = tuple(
            (gpu, rng.choice((0.2, 0.5, 0.9)), rng.choice((2, 8, 14)) * GIB) for gpu in placed
        )
        before = (dict(ledger.load), dict(ledger.memory_used), dict(ledger.workers))
        answer = ledger.fits_instead(old, new)
        assert (dict(ledger.load), dict(ledger.memory_used), dict(ledger.workers)) == before
        ledger.remove_all(old)
        long_way = all(ledger.fits(gpu, load, memory) for gpu, load, memory in new)
        disagreements += answer != long_way
        checked += long_way  # both outcomes must occur, or the comparison proves little
    assert disagreements == 0
    assert 40 < checked < 360


def test_a_failed_packing_search_is_remembered_only_until_the_ledger_changes() -> None:
    cluster = Cluster.uniform(2, 2)
    ledger = GpuLedger(cluster, threshold=1.0, min_residual=0.2)
    ledger.add((0, 0), 0.9, GIB)
    ledger.add((0, 1), 0.9, GIB)
    assert ledger.packed((0.5,), (GIB,)) is None
    assert ledger.packed((0.5,), (GIB,)) is None  # answered from memory: same ledger
    ledger.remove((0, 1), 0.9, GIB)  # room appears: the memory must not answer
    assert ledger.packed((0.5,), (GIB,)) == ((0, 1),)
    ledger.add((0, 1), 0.6, GIB)
    assert ledger.packed((0.5,), (GIB,)) is None
    ledger.remove((0, 0), 0.9, GIB)
    ledger.add((0, 0), 0.4, GIB)
    assert ledger.packed((0.5,), (GIB,)) == ((0, 0),)
