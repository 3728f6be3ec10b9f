"""A byte-level LSTM language model on Python's pydoc topics text (real English prose).

A recurrent model for the statistical-efficiency runs, as an entrypoint rather than a zoo
name: ``worker.zoo.examples.char_lstm:build``. Four blocks: byte embedding + LSTM layer 1,
LSTM layer 2, LSTM layer 3, and a LayerNorm + linear head. No dropout, so a run is a
deterministic function of its seed and data order.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from worker.zoo import Workload
from worker.zoo.datasets import BYTE_VOCAB, pydoc_text
from worker.zoo.gpt import next_byte_loss


class _Recurrent(nn.Module):
    """One LSTM layer over (batch, steps, width), optionally preceded by the byte embedding."""

    def __init__(self, width: int, embed: bool) -> None:
        super().__init__()
        self.embedding = nn.Embedding(BYTE_VOCAB, width) if embed else None
        self.lstm = nn.LSTM(width, width, batch_first=True)

    def forward(self, x: Tensor) -> Tensor:
        if self.embedding is not None:
            x = self.embedding(x)
        out: Tensor
        out, _ = self.lstm(x)
        return out


def build(width: int = 96, context: int = 64) -> Workload:
    blocks: list[nn.Module] = [
        _Recurrent(width, embed=True),
        _Recurrent(width, embed=False),
        _Recurrent(width, embed=False),
        nn.Sequential(nn.LayerNorm(width), nn.Linear(width, BYTE_VOCAB)),
    ]

    def example(batch: int, device: torch.device) -> Tensor:
        return torch.randint(0, BYTE_VOCAB, (batch, context), device=device)

    return Workload(
        name="char_lstm",
        blocks=blocks,
        block_names=["embed+lstm1", "lstm2", "lstm3", "head"],
        loss=next_byte_loss,
        make_data=lambda: pydoc_text(context=context),
        metric="loss",
        input_shape=(context,),
        make_example_input=example,
        description=f"byte-level 3-layer LSTM ({width} wide) on Python's pydoc topics text",
    )
