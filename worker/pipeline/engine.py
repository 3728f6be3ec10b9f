"""One pipeline-stage worker: runs its stage's share of the schedule, exchanges activations
and gradients with its neighbour stages point to point, all-reduces the coalesced gradient
with the same stage of the other replicas, and applies the 2BW (or flush) update.

The same code runs over torch.distributed (gloo on CPU; the NCCL path is the same calls but
is untested here) and over thread-simulated ranks (:mod:`worker.spb.thread_collectives`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.parallelism import PipelinePlan
from worker.pipeline.schedule import stage_schedule
from worker.pipeline.versions import MomentumSGD, WeightVersions
from worker.saved_bytes import SavedBytes
from worker.spb.collectives import Collectives, Work
from worker.spb.sampler import GlobalBatchSampler
from worker.zoo import load_workload

TAG_ACTIVATION = 0
TAG_GRADIENT = 1


@dataclass(frozen=True)
class PipelineConfig:
    model: str
    plan: PipelinePlan
    batch_size: int
    """Samples per replica per iteration; split into ``plan.micro_batches`` micro-batches."""
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 0.0
    seed: int = 0
    stash_weights: bool = True
    """False runs each backward on the newest weights instead of the version its forward
    used: the bug weight stashing exists to prevent. Only for demonstrating it."""
    model_options: Mapping[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    """Where this worker's stage lives. ``cuda:<i>`` pairs with an NCCL process group; that
    path is written but has not run in this project (no GPU was available)."""


@dataclass
class PipelineRunMetrics:
    """What one rank measured over one :meth:`PipelineTrainer.train` call."""

    rank: int
    stage: int
    replica: int
    iterations: int
    samples: int
    """Samples of the global batch processed (all replicas), i.e. the job's progress."""
    wall_s: float
    losses: list[float]
    """Per-iteration training loss of this replica's batch (last stage only; else empty)."""
    bytes_sent: int
    param_bytes: int
    """Peak bytes of live weight versions (distinct storages)."""
    weight_versions: int
    optimizer_bytes: int
    gradient_bytes: int
    """Peak bytes of coalesced-gradient accumulators."""
    activation_bytes: int
    """Peak bytes autograd kept for in-flight micro-batches (parameters excluded)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _InFlight:
    batch: int
    inputs: Tensor
    output: Tensor | None
    saved_bytes: int


class PipelineTrainer:
    def __init__(self, config: PipelineConfig, collectives: Collectives) -> None:
        plan = config.plan
        plan.check_workers(collectives.world_size)
        if config.batch_size % plan.micro_batches:
            raise InvalidSpecError(
                f"batch size {config.batch_size} is not a multiple of "
                f"{plan.micro_batches} micro-batches",
                field="batch_size",
            )
        self.config = config
        self.plan = plan
        self.comm = collectives
        self.rank = collectives.rank
        self.stage = plan.stage_of(self.rank)
        self.replica = plan.replica_of(self.rank)
        self.first = self.stage == 0
        self.last = self.stage == plan.num_stages - 1
        self.micro = config.batch_size // plan.micro_batches
        workload = load_workload(config.model, seed=config.seed, **dict(config.model_options))
        if workload.num_blocks != plan.num_blocks:
            raise InvalidSpecError(
                f"the plan is for {plan.num_blocks} blocks but {config.model!r} has "
                f"{workload.num_blocks}",
                field="stages",
            )
        self.loss_fn = workload.loss
        self.device = torch.device(config.device)
        blocks = plan.blocks_of(self.stage)
        self.first_block = blocks.start
        self.in_shape, self.out_shape = self._boundary_shapes(workload, blocks)
        self.module = nn.Sequential(*(workload.blocks[b] for b in blocks)).to(self.device)
        self.module.train()
        self.names = [name for name, _ in self.module.named_parameters()]
        weights = [p.detach() for p in self.module.parameters()]
        for p in self.module.parameters():
            p.requires_grad_(False)
        self.versions = WeightVersions.initial(weights, plan.schedule == "2bw")
        self.optimizer = MomentumSGD(config.lr, config.momentum, config.weight_decay)
        splits = workload.make_data()
        train = splits.train
        self.data = train
        self.eval_data = splits.eval
        self.metric = workload.metric
        self.sampler = GlobalBatchSampler(len(train), config.batch_size, plan.replicas, config.seed)
        self.iteration = 0
        self.stage_group = plan.ranks_of_stage(self.stage)
        collectives.prepare_groups([plan.ranks_of_stage(s) for s in range(plan.num_stages)])
        del workload

    # ------------------------------------------------------------------ public API

    def train(self, iterations: int) -> PipelineRunMetrics:
        """Run ``iterations`` batches through the pipeline, then drain it (a lease).

        Draining at the end changes only timing: which weight version a batch uses is fixed
        by its index, so a drained-and-resumed run computes exactly what a continuous one
        would.
        """
        if iterations < 1:
            raise InvalidSpecError("iterations must be >= 1", field="iterations")
        m = self.plan.micro_batches
        start = self.iteration
        self._batches: dict[int, tuple[Tensor, Tensor]] = {}
        self._inflight: dict[int, _InFlight] = {}
        self._grads: dict[int, list[Tensor]] = {}
        self._losses: dict[int, float] = {}
        self._sends: list[tuple[Work, Tensor]] = []
        self._peak = {"params": self.versions.param_bytes(), "grads": 0, "acts": 0, "versions": 0}
        self._peak["versions"] = self.versions.count()
        sent_before = self.comm.traffic.total_bytes
        began = time.perf_counter()
        ops = stage_schedule(self.plan.schedule, self.stage, self.plan.num_stages, iterations, m)
        for kind, j in ops:
            batch, index = start + j // m, j % m
            if kind == "F":
                self._forward(batch, index)
            else:
                self._backward(batch, index)
                if index == m - 1:
                    self._update(batch)
        self._wait_sends()
        wall = time.perf_counter() - began
        self.iteration = start + iterations
        return PipelineRunMetrics(
            rank=self.rank,
            stage=self.stage,
            replica=self.replica,
            iterations=iterations,
            samples=iterations * self.config.batch_size * self.plan.replicas,
            wall_s=wall,
            losses=[self._losses[b] for b in sorted(self._losses)],
            bytes_sent=round(self.comm.traffic.total_bytes - sent_before),
            param_bytes=self._peak["params"],
            weight_versions=self._peak["versions"],
            optimizer_bytes=self.optimizer.state_bytes(),
            gradient_bytes=self._peak["grads"],
            activation_bytes=self._peak["acts"],
        )

    def named_weights(self, version: int | None = None) -> dict[str, Tensor]:
        """This stage's weights (newest version by default), named as in
        ``nn.Sequential(*workload.blocks).named_parameters()``."""
        chosen = self.versions.newest if version is None else version
        out: dict[str, Tensor] = {}
        for name, tensor in zip(self.names, self.versions.get(chosen), strict=True):
            local, _, rest = name.partition(".")
            out[f"{int(local) + self.first_block}.{rest}"] = tensor.detach()
        return out

    # ------------------------------------------------------------------ internals

    def _boundary_shapes(
        self, workload: Any, blocks: range
    ) -> tuple[tuple[int, ...], tuple[int, ...]]:
        with torch.no_grad():
            x = workload.example_input(self.micro)
            in_shape = tuple(x.shape)
            for b in range(blocks.stop):
                if b == blocks.start:
                    in_shape = tuple(x.shape)
                x = workload.blocks[b](x)
            return in_shape, tuple(x.shape)

    def _version_for(self, batch: int) -> int:
        return batch - 1 if self.plan.schedule == "2bw" else batch

    def _batch(self, batch: int) -> tuple[Tensor, Tensor]:
        cached = self._batches.get(batch)
        if cached is None:
            # Forward ops visit batches in order, so the sampler advances exactly once each.
            inputs, targets = self.data.fetch(self.sampler.next_indices(self.replica))
            cached = (inputs.to(self.device), targets.to(self.device))
            self._batches[batch] = cached
        return cached

    def _micro(self, batch: int, index: int) -> tuple[Tensor, Tensor]:
        inputs, targets = self._batch(batch)
        rows = slice(index * self.micro, (index + 1) * self.micro)
        return inputs[rows], targets[rows]

    def _run(self, weights: list[Tensor], x: Tensor) -> Tensor:
        out: Tensor = functional_call(
            self.module, dict(zip(self.names, weights, strict=True)), (x,)
        )
        return out

    def _forward(self, batch: int, index: int) -> None:
        weights = self.versions.get(self._version_for(batch))
        if self.first:
            x, _ = self._micro(batch, index)
        else:
            x = torch.empty(self.in_shape, device=self.device)
            self.comm.recv(x, self.rank - 1, TAG_ACTIVATION).wait()
            x.requires_grad_(True)
        if self.last:
            self._micro(batch, index)  # fetch targets (advances the sampler in order)
        meter = SavedBytes({w.untyped_storage().data_ptr() for w in weights})
        if self.config.stash_weights:
            with torch.autograd.graph.saved_tensors_hooks(meter.pack, meter.unpack):
                out = self._run(weights, x)
                if self.last:
                    _, target = self._micro(batch, index)
                    out = self.loss_fn(out, target) / self.plan.micro_batches
        else:
            with torch.no_grad():
                out = self._run(weights, x)
            meter.seen[0] = x.numel() * x.element_size()  # only the input is kept
        if not self.last:
            sent = out.detach()
            self._sends.append((self.comm.send(sent, self.rank + 1, TAG_ACTIVATION), sent))
        key = batch * self.plan.micro_batches + index
        self._inflight[key] = _InFlight(batch, x, out, sum(meter.seen.values()))
        live = sum(f.saved_bytes for f in self._inflight.values())
        self._peak["acts"] = max(self._peak["acts"], live)

    def _backward(self, batch: int, index: int) -> None:
        item = self._inflight.pop(batch * self.plan.micro_batches + index)
        if self.config.stash_weights:
            weights = self.versions.get(self._version_for(batch))
            out = item.output
        else:
            weights = self.versions.get(self.versions.newest)
            out = self._run(weights, item.inputs)
            if self.last:
                _, target = self._micro(batch, index)
                out = self.loss_fn(out, target) / self.plan.micro_batches
        assert out is not None
        grad_out: Tensor | None = None
        if self.last:
            self._losses[batch] = self._losses.get(batch, 0.0) + float(out.detach())
        else:
            grad_out = torch.empty(self.out_shape, device=self.device)
            self.comm.recv(grad_out, self.rank + 1, TAG_GRADIENT).wait()
        wrt = list(weights) + ([] if self.first else [item.inputs])
        grads = torch.autograd.grad(out, wrt, grad_outputs=grad_out, allow_unused=True)
        param_grads = [
            torch.zeros_like(w) if g is None else g for w, g in zip(weights, grads, strict=False)
        ]
        total = self._grads.get(batch)
        if total is None:
            self._grads[batch] = param_grads
        else:
            for acc, g in zip(total, param_grads, strict=True):
                acc.add_(g)
        if not self.first:
            grad_in = grads[-1]
            if grad_in is None:
                grad_in = torch.zeros(self.in_shape, device=self.device)
            self._sends.append((self.comm.send(grad_in, self.rank - 1, TAG_GRADIENT), grad_in))
        live = sum(g.numel() * g.element_size() for gs in self._grads.values() for g in gs)
        self._peak["grads"] = max(self._peak["grads"], live)
        if index == self.plan.micro_batches - 1:
            self._batches.pop(batch, None)

    def _update(self, batch: int) -> None:
        grads = self._grads.pop(batch)
        if self.plan.replicas > 1 and grads:
            flat = torch.cat([g.reshape(-1) for g in grads])
            self.comm.all_reduce_sum(flat, self.stage_group).wait()
            flat.div_(self.plan.replicas)
            chunks = torch.split(flat, [g.numel() for g in grads])
            grads = [chunk.view_as(g) for chunk, g in zip(chunks, grads, strict=True)]
        newest = self.versions.newest
        current = self.versions.get(newest)
        # The version this batch ran on is no longer needed by anyone: drop it before the new
        # one exists, so no more than two versions (one under gpipe) are ever live.
        self.versions.drop(self._version_for(batch))
        self.versions.add(newest + 1, self.optimizer.step(current, grads))
        del current
        self._peak["versions"] = max(self._peak["versions"], self.versions.count())
        self._peak["params"] = max(self._peak["params"], self.versions.param_bytes())
        self._wait_sends()

    def _wait_sends(self) -> None:
        for work, _ in self._sends:
            work.wait()
        self._sends = []
