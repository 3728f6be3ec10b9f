"""One worker of a hybrid (SplitBrain-style) plan.

Data-parallel blocks run on this worker's shard of the batch. At the first sharded block the
shards are gathered into the global batch, and every worker runs the sharded blocks on all of
it with its slice of each linear layer (:mod:`worker.hybrid.sharded_linear`); the loss is the
mean over the global batch. Gradients:

- data-parallel blocks: each worker's gradient covers its own rows of the global mean, so the
  all-reduce *sums* them (no division);
- sharded weights: complete on each worker, no communication;
- other parameters of sharded blocks (row-layout biases, norms): identical on every worker.

Every worker then applies the same torch.optim.SGD step to what it holds.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.parallelism import HybridPlan
from worker.hybrid.sharded_linear import (
    ColumnLinear,
    RowLinear,
    count_linear,
    gather_rows,
    make_group,
    shard_linears,
)
from worker.saved_bytes import SavedBytes, tensor_bytes
from worker.spb.collectives import Collectives
from worker.spb.sampler import GlobalBatchSampler
from worker.zoo import load_workload


@dataclass(frozen=True)
class HybridConfig:
    model: str
    plan: HybridPlan
    batch_size: int
    """Samples per worker per iteration (the global batch is ``batch_size x workers``)."""
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 0.0
    seed: int = 0
    model_options: Mapping[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    """``cuda:<i>`` pairs with an NCCL process group: written, not run here (no GPU)."""


@dataclass
class HybridStepMetrics:
    iteration: int
    rank: int
    loss: float
    wall_s: float
    bytes_sent: int
    param_bytes: int
    sharded_param_bytes: int
    optimizer_bytes: int
    gradient_bytes: int
    activation_bytes: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class HybridTrainer:
    def __init__(self, config: HybridConfig, collectives: Collectives) -> None:
        plan = config.plan
        if plan.num_workers != collectives.world_size:
            raise InvalidSpecError(
                f"the plan is for {plan.num_workers} workers, the group has "
                f"{collectives.world_size}",
                field="num_workers",
            )
        self.config, self.plan, self.comm = config, plan, collectives
        self.rank = collectives.rank
        workload = load_workload(config.model, seed=config.seed, **dict(config.model_options))
        plan.check_linear_layers([count_linear(b) for b in workload.blocks])
        plan.check_shardable(  # the rule the planner refused narrower plans by at submit
            [
                (index + 1, layer.in_features, layer.out_features)
                for index, block in enumerate(workload.blocks)
                for layer in block.modules()
                if isinstance(layer, nn.Linear)
            ]
        )
        self.workload = workload
        self.group = make_group(collectives)
        split = plan.first_sharded - 1
        self.dp_blocks = nn.Sequential(*workload.blocks[:split])
        self.sharded_blocks = nn.Sequential(
            *(
                shard_linears(
                    workload.blocks[b],
                    self.group,
                    plan.layout_of(b + 1) or "column",
                    f"block {b + 1}",
                )
                for b in range(split, workload.num_blocks)
            )
        )
        self.device = torch.device(config.device)
        self.dp_blocks.to(self.device)
        self.sharded_blocks.to(self.device)
        self.dp_params = list(self.dp_blocks.parameters())
        self.sharded_params = [
            p
            for m in self.sharded_blocks.modules()
            if isinstance(m, ColumnLinear | RowLinear)
            for p in ([m.weight] if isinstance(m, RowLinear) else m.parameters(recurse=False))
        ]
        params = self.dp_params + list(self.sharded_blocks.parameters())
        self.optimizer = torch.optim.SGD(
            params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
        )
        self.params = params
        splits = workload.make_data()
        self.data = splits.train
        self.eval_data = splits.eval
        self.sampler = GlobalBatchSampler(
            len(self.data), config.batch_size, plan.num_workers, config.seed
        )
        self.iteration = 0

    def named_weights(self) -> dict[str, Tensor]:
        model = nn.Sequential(*self.dp_blocks, *self.sharded_blocks)
        return {n: p.detach().clone() for n, p in model.named_parameters()}

    def step(self) -> HybridStepMetrics:
        began = time.perf_counter()
        sent_before = self.comm.traffic.total_bytes
        inputs, targets = self.data.fetch(self.sampler.next_indices(self.rank))
        inputs, targets = inputs.to(self.device), targets.to(self.device)
        all_targets = self.group.gather(targets, 0, len(targets) * self.group.size)
        meter = SavedBytes({p.untyped_storage().data_ptr() for p in self.params})
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autograd.graph.saved_tensors_hooks(meter.pack, meter.unpack):
            hidden = gather_rows(self.dp_blocks(inputs), self.group)
            loss = self.workload.loss(self.sharded_blocks(hidden), all_targets)
        loss.backward()
        if len(self.group.ranks) > 1 and self.dp_params:
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.dp_params]
            flat = torch.cat([g.reshape(-1) for g in grads])
            self.comm.all_reduce_sum(flat, self.group.ranks).wait()
            chunks = torch.split(flat, [g.numel() for g in grads])
            for p, chunk in zip(self.dp_params, chunks, strict=True):
                p.grad = chunk.view_as(p).clone()
        grad_bytes = tensor_bytes(p.grad for p in self.params if p.grad is not None)
        self.optimizer.step()
        self.iteration += 1
        state = self.optimizer.state
        return HybridStepMetrics(
            iteration=self.iteration - 1,
            rank=self.rank,
            loss=float(loss.detach()),
            wall_s=time.perf_counter() - began,
            bytes_sent=round(self.comm.traffic.total_bytes - sent_before),
            param_bytes=tensor_bytes(self.params),
            sharded_param_bytes=tensor_bytes(self.sharded_params),
            optimizer_bytes=tensor_bytes(
                v for s in state.values() for v in s.values() if isinstance(v, Tensor)
            ),
            gradient_bytes=grad_bytes,
            activation_bytes=sum(meter.seen.values()),
        )
