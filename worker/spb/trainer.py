"""The SPB trainer: one instance per rank, driven iteration by iteration.

A step on rank ``r`` with stop depth ``d``:

1. blocks ``1..d`` run forward under ``torch.no_grad()`` (no graph, nothing saved);
2. blocks ``d+1..K`` and the loss run with autograd, then ``loss.backward()``;
3. each block's gradient becomes the mean over its contributors (``GradientSynchronizer``),
   BatchNorm running statistics are averaged over all ranks (``BufferAverager``);
4. every rank applies the same optimizer step to every block, so replicas stay bit-identical.

Plans change only at iteration boundaries (:meth:`SPBTrainer.schedule_plan`), which is how the
scheduler's "apply at iteration t" leases map onto a running process group.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import torch
from torch import Tensor

from jigsaw.model.block_noise import BlockNoise
from jigsaw.model.errors import InvalidSpecError, JigsawError
from jigsaw.model.plan import SPBPlan, full_backprop
from jigsaw.oracle.memory import optimizer_state_copies, worker_memory
from worker.spb import checkpoint as ckpt
from worker.spb.collectives import Collectives
from worker.spb.gradient_sync import BufferAverager, GradientSynchronizer
from worker.spb.instrumentation import (
    IterationMetrics,
    PhaseClock,
    SavedActivationMeter,
    peak_rss_bytes,
    tensor_bytes,
)
from worker.spb.noise import BlockNoiseTracker
from worker.spb.preconditioner import noise_preconditioner
from worker.spb.sampler import GlobalBatchSampler
from worker.spb.schedule import CommSchedule
from worker.spb.trainer_setup import (
    TrainerConfig,
    build_optimizer,
    check_blocks_disjoint,
    seed_rngs,
)
from worker.zoo import DataSplits, Workload, load_workload

EVAL_BATCH = 256


class PlanSwitchError(JigsawError):
    """A plan switch was scheduled for an iteration that has already started."""


class SPBTrainer:
    def __init__(
        self,
        config: TrainerConfig,
        collectives: Collectives,
        *,
        workload: Workload | None = None,
        data: DataSplits | None = None,
    ) -> None:
        self.config = config
        self.collectives = collectives
        self.rank = collectives.rank
        self.world_size = collectives.world_size
        self.device = torch.device(config.device)
        self.workload = workload or load_workload(
            config.model, seed=config.seed, **dict(config.model_options)
        )
        self.blocks = [block.to(self.device).train() for block in self.workload.blocks]
        check_blocks_disjoint(self.blocks)
        self.params = [p for block in self.blocks for p in block.parameters()]
        self.optimizer = build_optimizer(config, self.params)
        self.data = data or self.workload.make_data()
        self.sampler = GlobalBatchSampler(
            len(self.data.train), config.batch_size, self.world_size, config.seed
        )
        seed_rngs(config.seed, self.rank)
        self.iteration = 0
        self.history: deque[IterationMetrics] = deque(maxlen=config.history_limit)
        self._pending: dict[int, SPBPlan] = {}
        self._meter = SavedActivationMeter(config.measure_activations)
        self._clock = PhaseClock(self.device)
        self._buffers = BufferAverager(self.blocks, collectives) if config.average_buffers else None
        self._sync: GradientSynchronizer | None = None
        self._probe_sync: GradientSynchronizer | None = None
        if config.noise_probe_every < 0:
            raise InvalidSpecError("noise_probe_every must be >= 0", field="noise_probe_every")
        self.noise = (
            BlockNoiseTracker(len(self.blocks), config.batch_size, config.noise_decay)
            if config.gradient_noise
            else None
        )
        # Adam and AdamW: the noise is measured in Adam's preconditioned space.
        self._preconditioner = noise_preconditioner(self.optimizer) if self.noise else None
        self.plan = self._checked(config.plan)
        self._install(self.plan)

    # ----- plans -------------------------------------------------------------------------
    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def depth(self) -> int:
        return self.plan.depths[self.rank]

    def _checked(self, plan: SPBPlan) -> SPBPlan:
        if plan.num_workers != self.world_size or plan.num_blocks != self.num_blocks:
            raise InvalidSpecError(
                f"plan is for {plan.num_workers} workers x {plan.num_blocks} blocks but this job "
                f"has {self.world_size} workers x {self.num_blocks} blocks",
                field="spb",
            )
        return plan

    def _install(self, plan: SPBPlan) -> None:
        schedule = CommSchedule.from_plan(plan)
        # Collective on every rank; the group list depends on the plan only.
        self.collectives.prepare_groups(schedule.reduce_groups())
        if self._sync is not None:
            self._sync.close()
        if self._probe_sync is None and self._probes_enabled():
            full = CommSchedule.from_plan(full_backprop(self.world_size, self.num_blocks))
            self.collectives.prepare_groups(full.reduce_groups())
            self._probe_sync = GradientSynchronizer(
                self.blocks, full, self.collectives, self.noise, self._preconditioner
            )
            self._probe_sync.close()
        self._sync = GradientSynchronizer(
            self.blocks, schedule, self.collectives, self.noise, self._preconditioner
        )
        self.plan = plan

    def _probes_enabled(self) -> bool:
        return self.noise is not None and self.config.noise_probe_every > 0 and self.world_size > 1

    def _probe_due(self) -> bool:
        """A probe runs at the last iteration of every ``noise_probe_every`` window, and only
        while the plan leaves some block with a single contributor."""
        if self._probe_sync is None:
            return False
        if (self.iteration + 1) % self.config.noise_probe_every != 0:
            return False
        return any(len(self.plan.contributors(b)) < 2 for b in range(1, self.num_blocks + 1))

    def noise_stats(self) -> tuple[BlockNoise, ...]:
        """Smoothed per-block gradient statistics so far (empty if measurement is off)."""
        return self.noise.snapshot() if self.noise is not None else ()

    def schedule_plan(self, plan: SPBPlan, apply_at: int) -> SPBPlan:
        """Switch to ``plan`` at the start of iteration ``apply_at`` (0-based count of completed
        iterations). Every rank must schedule the same plan for the same iteration."""
        if apply_at < self.iteration:
            raise PlanSwitchError(
                f"cannot apply a plan at iteration {apply_at}: rank {self.rank} is already at "
                f"iteration {self.iteration}"
            )
        self._pending[apply_at] = self._checked(plan)
        return plan

    def _apply_pending_plan(self) -> None:
        plan = self._pending.pop(self.iteration, None)
        if plan is not None and plan != self.plan:
            self._install(plan)

    # ----- training ----------------------------------------------------------------------
    def _forward_loss(self, inputs: Tensor, targets: Tensor, depth: int) -> Tensor:
        hidden = inputs
        with torch.no_grad():
            for block in self.blocks[:depth]:
                hidden = block(hidden)
        self._meter.exclude(self.params)
        with self._meter:
            for block in self.blocks[depth:]:
                hidden = block(hidden)
            return self.workload.loss(hidden, targets)

    def step(self) -> IterationMetrics:
        """Run one iteration; return (and keep in ``history``) its measurements."""
        self._apply_pending_plan()
        assert self._sync is not None
        probe = self._probe_due()
        sync = self._sync
        if probe:
            assert self._probe_sync is not None
            sync.close()
            sync = self._probe_sync
            sync.open()
        try:
            return self._step(sync, 0 if probe else self.depth, probe)
        finally:
            if probe:
                sync.close()
                self._sync.open()

    def _step(self, sync: GradientSynchronizer, depth: int, probe: bool) -> IterationMetrics:
        cuda = self.device.type == "cuda"
        if cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        self._clock.start()
        self.optimizer.zero_grad(set_to_none=True)
        sync.start_iteration()
        inputs, targets = self.data.train.fetch(self.sampler.next_indices(self.rank))
        inputs = inputs.to(self.device, non_blocking=True)
        targets = targets.to(self.device, non_blocking=True)
        self._clock.mark("data")
        loss = self._forward_loss(inputs, targets, depth)
        self._clock.mark("forward")
        if self._buffers is not None:
            self._buffers.launch()
        loss.backward()
        self._clock.mark("backward")
        sync.finish()
        if self._buffers is not None:
            self._buffers.finish()
        self._clock.mark("sync")
        self.optimizer.step()
        self._clock.mark("optimizer")
        loss_value = float(loss.item())
        if self.noise is not None:
            self.noise.end_iteration(self.iteration)
            self._clock.mark("statistics")
        phases = self._clock.durations()
        saved = self._meter.total_bytes
        if cuda:
            peak = int(torch.cuda.max_memory_allocated(self.device))
        else:
            # The oracle's formula, with the activations this step saved.
            copies = optimizer_state_copies(self.config.optimizer, self.config.momentum)
            peak = worker_memory(
                tensor_bytes(self.params), saved, optimizer_copies=copies
            ).model_bytes
        metrics = IterationMetrics(
            iteration=self.iteration,
            rank=self.rank,
            depth=depth,
            plan=self.plan.describe(),
            loss=loss_value,
            samples=len(targets),
            forward_time_s=phases["forward"],
            backward_time_s=phases["backward"],
            sync_time_s=phases["sync"],
            optimizer_time_s=phases["optimizer"],
            iteration_time_s=sum(phases.values()),
            saved_activation_bytes=saved,
            peak_memory_bytes=peak,
            peak_rss_bytes=peak_rss_bytes(),
            bytes_sent=self.collectives.traffic.take(),
            probe=probe,
        )
        self.iteration += 1
        self.history.append(metrics)
        return metrics

    def run(self, num_iterations: int) -> list[IterationMetrics]:
        """Run ``num_iterations`` iterations (a lease), applying scheduled plan switches."""
        return [self.step() for _ in range(num_iterations)]

    @torch.no_grad()
    def evaluate(self, max_samples: int | None = None) -> float:
        """Held-out accuracy or mean loss (the workload's metric), with BN in eval mode, on the
        first ``max_samples`` held-out samples (all by default; a fixed subset stays
        comparable across evaluations)."""
        held_out = self.data.eval
        if held_out is None:
            raise InvalidSpecError(f"{self.workload.name} has no evaluation split", field="model")
        size = len(held_out) if max_samples is None else min(max_samples, len(held_out))
        for block in self.blocks:
            block.eval()
        try:
            total, count = 0.0, 0
            for start in range(0, size, EVAL_BATCH):
                indices = torch.arange(start, min(start + EVAL_BATCH, size))
                inputs, targets = held_out.fetch(indices)
                outputs = self.workload.forward(inputs.to(self.device))
                targets = targets.to(self.device)
                if self.workload.metric == "accuracy":
                    total += float((outputs.argmax(dim=-1) == targets).sum())
                    count += targets.numel()
                else:
                    total += float(self.workload.loss(outputs, targets)) * len(indices)
                    count += len(indices)
            return total / count
        finally:
            for block in self.blocks:
                block.train()

    def state_vector(self) -> Tensor:
        """All parameters and buffers flattened (for replica-identity checks)."""
        tensors = [p.detach() for p in self.params]
        tensors += [b.detach().float() for block in self.blocks for b in block.buffers()]
        return torch.cat([t.reshape(-1).cpu().float() for t in tensors])

    # ----- checkpoints -------------------------------------------------------------------
    def save_checkpoint(self, directory: str | Path) -> Path:
        """Collective: every rank calls it at the same iteration boundary."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        if self.rank == 0:
            shared = {
                "model": self.workload.name,
                "config": asdict(self.config),
                "iteration": self.iteration,
                "plan": list(self.plan.depths),
                "pending": {it: list(p.depths) for it, p in self._pending.items()},
                "blocks": [block.state_dict() for block in self.blocks],
                "optimizer": self.optimizer.state_dict(),
                "sampler": self.sampler.state_dict(),
                "noise": self.noise.state_dict() if self.noise is not None else None,
            }
            ckpt.atomic_save(shared, path / ckpt.SHARED_FILE)
        ckpt.atomic_save(
            {"rank": self.rank, "rng": ckpt.capture_rng()}, path / ckpt.rank_file(self.rank)
        )
        self.collectives.barrier()
        if self.rank == 0:
            ckpt.write_meta(
                path,
                {
                    "model": self.workload.name,
                    "iteration": self.iteration,
                    "world_size": self.world_size,
                    "num_blocks": self.num_blocks,
                    "plan": self.plan.describe(),
                },
            )
        self.collectives.barrier()
        return path

    def load_checkpoint(self, directory: str | Path, *, plan: SPBPlan | None = None) -> None:
        """Collective. Restores weights, optimizer, data position, RNG and iteration.

        ``plan`` overrides the saved plan (needed when the world size changed). Ranks without a
        saved RNG file (a larger world) are reseeded deterministically from seed and rank.
        """
        shared, own = ckpt.read_checkpoint(Path(directory), self.rank)
        if shared["model"] != self.workload.name or len(shared["blocks"]) != self.num_blocks:
            raise ckpt.CheckpointError(
                f"checkpoint holds {shared['model']} with {len(shared['blocks'])} blocks, "
                f"this trainer runs {self.workload.name} with {self.num_blocks}"
            )
        for block, state in zip(self.blocks, shared["blocks"], strict=True):
            block.load_state_dict(state)
        self.optimizer.load_state_dict(shared["optimizer"])
        self.sampler.load_state_dict(shared["sampler"])
        if self.noise is not None and shared.get("noise"):
            self.noise.load_state_dict(shared["noise"])
        self.iteration = int(shared["iteration"])
        if plan is None and len(shared["plan"]) != self.world_size:
            raise ckpt.CheckpointError(
                f"checkpoint plan has {len(shared['plan'])} workers but this job has "
                f"{self.world_size}: pass plan= to choose a plan for the new size"
            )
        self._install(self._checked(plan if plan is not None else self._saved(shared["plan"])))
        self._pending = {}
        if plan is None:
            self._pending = {
                int(it): self._checked(self._saved(d)) for it, d in shared["pending"].items()
            }
        if own is not None:
            ckpt.restore_rng(own["rng"])
        else:
            seed_rngs(self.config.seed + self.iteration, self.rank)

    def _saved(self, depths: Sequence[int]) -> SPBPlan:
        """A plan as a checkpoint stores it (its depths; K is this model's)."""
        return SPBPlan(tuple(int(d) for d in depths), self.num_blocks)

    def close(self) -> None:
        if self._sync is not None:
            self._sync.close()
