"""Linear layers split across a group, and the collectives their layouts need.

Inside the sharded part of the model every activation is *replicated*: each worker holds the
whole global batch, identical on every worker, and so is its gradient. Each layer keeps that
invariant:

- :class:`ColumnLinear` holds ``out/N`` output rows of the weight. Forward: its slice of the
  output, then an all-gather of the features. Backward: the input gradient is a partial sum
  over the shards, so it is all-reduced.
- :class:`RowLinear` holds ``in/N`` input columns. Forward: the partial product over its
  input slice, all-reduced, plus the (replicated) bias. Backward: its slice of the input
  gradient, all-gathered.

:func:`gather_rows` joins the workers' batch shards into the global batch at the first
sharded block; its backward keeps this worker's rows of the (replicated) gradient.

All-gathers are built from an all-reduce of a zero-padded buffer, because the collectives
seam (worker/spb/collectives.py) offers all-reduce and point-to-point only. That moves
2(N-1)/N of the gathered size per worker instead of the (N-1)/N a ring all-gather needs; the
byte counters and the oracle charge what is actually sent.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional

from jigsaw.model.errors import InvalidSpecError
from worker.spb.collectives import Collectives


class _Group:
    def __init__(self, comm: Collectives) -> None:
        self.comm = comm
        self.ranks = tuple(range(comm.world_size))
        self.size = comm.world_size
        self.index = comm.rank

    def all_reduce(self, tensor: Tensor) -> Tensor:
        out = tensor.detach().clone().contiguous()
        self.comm.all_reduce_sum(out, self.ranks).wait()
        return out

    def span(self, total: int) -> tuple[int, int]:
        """(start, width) of this worker's share of ``total``: the first ``total % N``
        workers take one more."""
        base, extra = divmod(total, self.size)
        width = base + (1 if self.index < extra else 0)
        return self.index * base + min(self.index, extra), width

    def gather(self, part: Tensor, dim: int, total: int) -> Tensor:
        shape = list(part.shape)
        shape[dim] = total
        start, width = self.span(total)
        padded = part.new_zeros(shape)
        padded.narrow(dim, start, width).copy_(part.detach())
        self.comm.all_reduce_sum(padded, self.ranks).wait()
        return padded


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, part: Tensor, group: _Group, dim: int, total: int) -> Tensor:
        ctx.group, ctx.dim, ctx.total = group, dim, total
        return group.gather(part, dim, total)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None]:
        start, width = ctx.group.span(ctx.total)
        return grad.narrow(ctx.dim, start, width).contiguous(), None, None, None


class _Split(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, full: Tensor, group: _Group, dim: int) -> Tensor:
        ctx.group, ctx.dim, ctx.total = group, dim, full.shape[dim]
        start, width = group.span(full.shape[dim])
        return full.narrow(dim, start, width).contiguous()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        return ctx.group.gather(grad.contiguous(), ctx.dim, ctx.total), None, None


class _ReduceForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, partial: Tensor, group: _Group) -> Tensor:
        del ctx
        return group.all_reduce(partial)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        del ctx
        return grad, None


class _ReduceBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, replicated: Tensor, group: _Group) -> Tensor:
        ctx.group = group
        return replicated.view_as(replicated)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        return ctx.group.all_reduce(grad), None


def gather_rows(part: Tensor, group: _Group) -> Tensor:
    """Every worker has the same number of rows (the sampler gives equal shards)."""
    total = part.shape[0] * group.size
    out: Tensor = _Gather.apply(part, group, 0, total)  # type: ignore[no-untyped-call]
    return out


def _split_range(total: int, group: _Group, what: str) -> slice:
    if total < group.size:
        raise InvalidSpecError(
            f"{what} of {total} cannot be split across {group.size} workers",
            field="sharded",
        )
    start, width = group.span(total)
    return slice(start, start + width)


class ColumnLinear(nn.Module):
    def __init__(self, full: nn.Linear, group: _Group, where: str) -> None:
        super().__init__()
        self.group = group
        rows = _split_range(full.out_features, group, f"{where}: out_features")
        self.out_features = full.out_features
        self.weight = nn.Parameter(full.weight.detach()[rows].clone())
        self.bias = (
            nn.Parameter(full.bias.detach()[rows].clone()) if full.bias is not None else None
        )

    def forward(self, x: Tensor) -> Tensor:
        x = _ReduceBackward.apply(x, self.group)  # type: ignore[no-untyped-call]
        part = functional.linear(x, self.weight, self.bias)
        out: Tensor = _Gather.apply(part, self.group, part.dim() - 1, self.out_features)  # type: ignore[no-untyped-call]
        return out


class RowLinear(nn.Module):
    def __init__(self, full: nn.Linear, group: _Group, where: str) -> None:
        super().__init__()
        self.group = group
        self.columns = _split_range(full.in_features, group, f"{where}: in_features")
        self.weight = nn.Parameter(full.weight.detach()[:, self.columns].clone())
        self.bias = nn.Parameter(full.bias.detach().clone()) if full.bias is not None else None

    def forward(self, x: Tensor) -> Tensor:
        part = _Split.apply(x, self.group, x.dim() - 1)  # type: ignore[no-untyped-call]
        out: Tensor = _ReduceForward.apply(functional.linear(part, self.weight), self.group)  # type: ignore[no-untyped-call]
        return out + self.bias if self.bias is not None else out


def count_linear(module: nn.Module) -> int:
    return sum(1 for m in module.modules() if isinstance(m, nn.Linear))


def shard_linears(module: nn.Module, group: _Group, layout: str, where: str) -> nn.Module:
    """Replace every nn.Linear inside ``module`` (or ``module`` itself) by its shard."""
    make = ColumnLinear if layout == "column" else RowLinear
    if isinstance(module, nn.Linear):
        return make(module, group, where)
    for name, child in list(module.named_children()):
        setattr(module, name, shard_linears(child, group, layout, f"{where}.{name}"))
    return module


def make_group(comm: Collectives) -> _Group:
    return _Group(comm)
