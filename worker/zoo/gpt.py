"""gpt_small: a small GPT-style causal decoder over bytes, trained on real text.

Byte-level (vocabulary 256) so it needs no tokenizer and works on any text. K=4 blocks:
block 1 = token+position embeddings + decoder layer 1, blocks 2-3 = one decoder layer each,
block 4 = decoder layer 4 + final LayerNorm + LM head. The head is not tied to the embedding
on purpose: a parameter shared by two blocks would make "the gradient of block b" ambiguous.
No dropout, so a run is a deterministic function of its seed and data order.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional

from worker.zoo.datasets import BYTE_VOCAB, pydoc_text
from worker.zoo.workload import Workload


class DecoderLayer(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )

    def forward(self, x: Tensor) -> Tensor:
        batch, steps, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(width, dim=2)
        shape = (batch, steps, self.heads, width // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        attended = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, steps, width))
        out: Tensor = x + self.mlp(self.norm2(x))
        return out


class Embedding(nn.Module):
    def __init__(self, width: int, context: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(BYTE_VOCAB, width)
        self.positions = nn.Embedding(context, width)

    def forward(self, tokens: Tensor) -> Tensor:
        steps = torch.arange(tokens.shape[1], device=tokens.device)
        embedded: Tensor = self.tokens(tokens) + self.positions(steps)
        return embedded


class LanguageModelHead(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, BYTE_VOCAB, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        logits: Tensor = self.head(self.norm(x))
        return logits


def next_byte_loss(logits: Tensor, targets: Tensor) -> Tensor:
    return functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def build_gpt_small(
    *, width: int = 128, heads: int = 4, layers: int = 4, context: int = 64
) -> Workload:
    if layers < 4:
        raise ValueError(f"gpt_small needs at least 4 layers (one per block), got {layers}")
    decoder = [DecoderLayer(width, heads) for _ in range(layers)]
    # Extra layers beyond four go to the middle blocks so both ends stay one layer deep.
    extra = layers - 4
    middle_a = decoder[1 : 2 + extra // 2]
    middle_b = decoder[2 + extra // 2 : layers - 1]
    blocks: list[nn.Module] = [
        nn.Sequential(Embedding(width, context), decoder[0]),
        nn.Sequential(*middle_a),
        nn.Sequential(*middle_b),
        nn.Sequential(decoder[-1], LanguageModelHead(width)),
    ]

    def example(batch: int, device: torch.device) -> Tensor:
        return torch.randint(0, BYTE_VOCAB, (batch, context), device=device)

    return Workload(
        name="gpt_small",
        blocks=blocks,
        block_names=["embed+layer1", "layer2", "layer3", "layer4+head"],
        loss=next_byte_loss,
        make_data=lambda: pydoc_text(context=context),
        metric="loss",
        input_shape=(context,),
        make_example_input=example,
        description=(
            f"byte-level GPT decoder, {layers} layers x {width} wide, {heads} heads, "
            f"context {context}, on Python's pydoc topics text"
        ),
    )
