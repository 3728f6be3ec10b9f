"""The lease seam over the SPB (data-parallel) engine: one step at a time, plans switch in place."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch

from jigsaw.efficiency.lr_scaling import scaled_learning_rate
from jigsaw.model.block_noise import BlockNoise
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import Plan, PlanRequest, SPBPlan
from jigsaw.model.spec_checks import OPTIMIZERS
from jigsaw.oracle.memory import optimizer_state_copies, worker_memory
from worker.runtime.lease_trainer import OnIteration, PlanChangeRefused, RunOutcome
from worker.runtime.messages import GangConfig
from worker.saved_bytes import tensor_bytes
from worker.spb import IterationMetrics, SPBTrainer, TrainerConfig
from worker.spb.collectives import Collectives
from worker.zoo import load_workload


def plan_for_built_model(plan: SPBPlan, request: PlanRequest | None, num_blocks: int) -> SPBPlan:
    """The one place a job's plan meets the K its workers built. When the control plane did
    not know K it sends the user's request, resolved here; a full-backprop plan it resolved
    without K means the same at any K (re-plans sent before K was learned are such)."""
    if request is not None:
        return request.resolve(plan.num_workers, num_blocks)
    if plan.is_full_backprop and plan.num_blocks != num_blocks:
        return plan.rebased(num_blocks)
    return plan


def trainer_optimizer(name: str) -> Literal["sgd", "adamw"]:
    """The job's optimizer as the engine names it; anything else is refused naming the field
    (the API refuses it at submit: this guards gangs started by other paths)."""
    if name == "sgd":
        return "sgd"
    if name == "adamw":
        return "adamw"
    raise InvalidSpecError(
        f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {name[:40]!r}", field="optimizer"
    )


class SPBLease:
    kind = "spb"

    def __init__(self, config: GangConfig, collectives: Collectives, device: str) -> None:
        plan = config.plan
        if not isinstance(plan, SPBPlan):
            raise TypeError(f"the SPB engine cannot run {plan!r}")
        self.rank = collectives.rank
        workload = load_workload(config.model, seed=config.seed)
        self.trainer = SPBTrainer(
            TrainerConfig(
                model=config.model,
                plan=plan_for_built_model(plan, config.plan_request, len(workload.blocks)),
                batch_size=config.batch_size,
                optimizer=trainer_optimizer(config.optimizer),
                lr=config.learning_rate,
                seed=config.seed,
                device=device,
                history_limit=1,
                noise_probe_every=config.noise_probe_every,
            ),
            collectives,
            workload=workload,
        )
        self.num_blocks = self.trainer.num_blocks
        self.device = self.trainer.device
        self.base_global_batch = config.base_global_batch
        self.base_learning_rate = config.learning_rate
        self._follow_batch()

    @property
    def iteration(self) -> int:
        return self.trainer.iteration

    @property
    def metric(self) -> str:
        return "accuracy" if self.trainer.workload.metric == "accuracy" else "eval_loss"

    def current_plan(self) -> SPBPlan:
        plan: SPBPlan = self.trainer.plan
        return plan

    def describe_plan(self) -> str:
        return self.trainer.plan.describe()

    def switch_plan(self, plan: Plan) -> None:
        if not isinstance(plan, SPBPlan):
            raise PlanChangeRefused(
                f"a data-parallel gang cannot switch to {plan.describe()} in place: "
                "stop it with a checkpoint and start it under the new plan"
            )
        resolved = plan_for_built_model(plan, None, self.num_blocks)
        self.trainer.schedule_plan(resolved, apply_at=self.trainer.iteration)

    def run(self, iterations: int, on_iteration: OnIteration) -> RunOutcome:
        steps: list[IterationMetrics] = []
        for _ in range(iterations):
            steps.append(self.trainer.step())
            on_iteration(self.trainer.iteration)
        return RunOutcome(
            iterations=len(steps),
            losses=tuple(m.loss for m in steps),
            samples=sum(m.samples for m in steps),
            compute_s=sum(m.forward_time_s + m.backward_time_s + m.optimizer_time_s for m in steps),
            sync_s=sum(m.sync_time_s for m in steps),
            iteration_s=sum(m.iteration_time_s for m in steps),
            saved_activation_bytes=max((m.saved_activation_bytes for m in steps), default=0),
            peak_memory_bytes=max((m.peak_memory_bytes for m in steps), default=0),
            bytes_sent=sum(m.bytes_sent for m in steps),
            probes=sum(m.probe for m in steps),
        )

    def static_memory_bytes(self) -> int:
        config = self.trainer.config
        copies = optimizer_state_copies(config.optimizer, config.momentum)
        return worker_memory(tensor_bytes(self.trainer.params), optimizer_copies=copies).model_bytes

    def save_checkpoint(self, directory: Path) -> None:
        self.trainer.save_checkpoint(directory)

    def load_checkpoint(self, directory: Path) -> None:
        # The plan may differ from the saved one (the scheduler re-planned, or the world size
        # changed), so it is passed explicitly.
        self.trainer.load_checkpoint(directory, plan=self.trainer.plan)
        self._follow_batch()

    def _follow_batch(self) -> None:
        """An adaptive batch's learning rate: the base rate scaled for this gang's global
        batch by the optimizer's rule, with the job's own gradient statistics (restored with
        the checkpoint); the optimizer's other state is kept as restored."""
        if self.base_global_batch is None:
            return
        trainer = self.trainer
        rate = scaled_learning_rate(
            self.base_learning_rate,
            self.base_global_batch,
            trainer.config.batch_size * trainer.world_size,
            trainer.config.optimizer,
            trainer.noise_stats(),
        )
        for group in trainer.optimizer.param_groups:
            group["lr"] = rate

    @torch.no_grad()
    def evaluate(self, max_samples: int | None) -> float | None:
        return self.trainer.evaluate(max_samples) if self.rank == 0 else None

    def noise_stats(self) -> tuple[BlockNoise, ...]:
        return self.trainer.noise_stats()

    def close(self) -> None:
        self.trainer.close()
