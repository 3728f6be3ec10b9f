"""Offline datasets. Nothing here downloads anything.

- ``digits``: scikit-learn's bundled 8x8 handwritten digits (1,797 images, 10 classes).
- ``pydoc_text``: the prose of Python's own documentation topics (``pydoc_data.topics``, about
  465 KB of English text that ships with every CPython), as byte-level next-character data.
- ``synthetic_images``: seeded random tensors, for throughput/profiling of big models only;
  never use them to measure statistical efficiency.
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from worker.zoo.workload import DataSplits, TensorPairDataset

DIGITS_EVAL_FRACTION = 0.2
TEXT_EVAL_FRACTION = 0.1
BYTE_VOCAB = 256


def _split_permutation(n: int, eval_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    n_eval = round(n * eval_fraction)
    return order[n_eval:], order[:n_eval]


def digits(*, image: bool, split_seed: int = 0) -> DataSplits:
    """Digits as flat 64-feature vectors (``image=False``) or 1x8x8 images, scaled to [0, 1].

    The train/eval split is fixed by ``split_seed`` and independent of the training seed, so
    every run of every plan is scored on the same held-out images.
    """
    from sklearn.datasets import load_digits  # local import: sklearn is slow to import

    bunch = load_digits()
    features = torch.tensor(bunch.data, dtype=torch.float32) / 16.0
    targets = torch.tensor(bunch.target, dtype=torch.long)
    if image:
        features = features.view(-1, 1, 8, 8)
    train_idx, eval_idx = _split_permutation(len(targets), DIGITS_EVAL_FRACTION, split_seed)
    train = TensorPairDataset(features[train_idx], targets[train_idx])
    held_out = TensorPairDataset(features[eval_idx], targets[eval_idx])
    return DataSplits(train, held_out, f"sklearn digits, {len(train)} train / {len(held_out)} eval")


def pydoc_corpus() -> bytes:
    """The concatenated text of ``pydoc_data.topics`` in sorted topic order (deterministic
    for a given Python version)."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics)).encode("utf-8")


def pydoc_text(*, context: int) -> DataSplits:
    """Next-byte prediction windows of ``context`` bytes; the last 10% of the corpus is held
    out (a contiguous tail, so no eval window overlaps a training window)."""
    corpus = torch.frombuffer(bytearray(pydoc_corpus()), dtype=torch.uint8).long()
    split_at = int(len(corpus) * (1 - TEXT_EVAL_FRACTION))
    train = _windows(corpus[:split_at], context, stride=context)
    held_out = _windows(corpus[split_at:], context, stride=context)
    version = ".".join(str(v) for v in sys.version_info[:3])
    return DataSplits(
        train,
        held_out,
        f"pydoc_data.topics of Python {version}: {len(corpus)} bytes, "
        f"{len(train)} train / {len(held_out)} eval windows of {context}",
    )


def _windows(tokens: torch.Tensor, context: int, stride: int) -> TensorPairDataset:
    starts = torch.arange(0, len(tokens) - context - 1, stride)
    offsets = torch.arange(context + 1)
    rows = tokens[starts[:, None] + offsets[None, :]]
    return TensorPairDataset(rows[:, :-1].contiguous(), rows[:, 1:].contiguous())


def synthetic_images(
    *, shape: tuple[int, ...], num_classes: int, size: int = 256, seed: int = 0
) -> DataSplits:
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(size, *shape, generator=generator)
    targets = torch.randint(0, num_classes, (size,), generator=generator)
    return DataSplits(
        TensorPairDataset(inputs, targets),
        None,
        f"synthetic {size} x {list(shape)} (throughput/profiling only)",
    )
