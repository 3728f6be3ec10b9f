"""The data sampler across resizes: its position counts global samples, so a gang of another
size restored from it takes the rest of the epoch between its ranks, nothing skipped and
nothing seen twice (a resize changes who reads a sample, never which samples an epoch has)."""

from __future__ import annotations

import pytest

from worker.spb.sampler import GlobalBatchSampler

DATASET = 1000


def epoch_zero(sizes: list[tuple[int, int, int]]) -> list[int]:
    """Every index the ranks read in epoch 0 when the gang runs ``iterations`` at each
    ``(world_size, worker_batch, iterations)`` in turn, restored from the previous sampler's
    state at each change (as a resized gang restores the checkpoint)."""
    seen: list[int] = []
    state: dict[str, int] | None = None
    for world, batch, iterations in sizes:
        ranks = [GlobalBatchSampler(DATASET, batch, world, seed=7) for _ in range(world)]
        for sampler in ranks:  # each rank restores the same checkpointed position
            if state is not None:
                sampler.load_state_dict(state)
        for _ in range(iterations):
            if ranks[0].offset + ranks[0].global_batch > DATASET:
                return seen  # the next iteration starts epoch 1
            for rank, sampler in enumerate(ranks):
                seen += [int(i) for i in sampler.next_indices(rank)]
        state = ranks[0].state_dict()
    return seen


@pytest.mark.parametrize(
    "sizes",
    [
        [(4, 12, 5), (2, 24, 7), (3, 16, 100)],  # fixed global batch 48: 4 -> 2 -> 3
        [(2, 16, 4), (4, 16, 3), (1, 40, 100)],  # adaptive: global batch 32 -> 64 -> 40
    ],
    ids=["fixed", "adaptive"],
)
def test_a_resized_epoch_reads_every_sample_at_most_once(sizes: list[tuple[int, int, int]]) -> None:
    seen = epoch_zero(sizes)
    assert len(seen) == len(set(seen))
    last_batch = sizes[-1][0] * sizes[-1][1]
    assert DATASET - last_batch < len(seen) <= DATASET  # only a tail under one batch is left


def test_the_same_global_batches_whatever_the_size() -> None:
    """With a fixed global batch each iteration reads the same samples at every size."""
    single = GlobalBatchSampler(DATASET, 48, 1, seed=7)
    resized = epoch_zero([(4, 12, 5), (2, 24, 7), (3, 16, 3)])
    expected = [int(i) for _ in range(15) for i in single.next_indices(0)]
    assert sorted(resized[: 48 * 15]) == sorted(expected)
    for step in range(15):
        window = slice(48 * step, 48 * (step + 1))
        assert sorted(resized[window]) == sorted(expected[window])
