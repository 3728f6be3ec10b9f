"""The lease seam over the SplitBrain-style hybrid engine: one step at a time, checkpoints
every worker's shard; a plan change is refused (the shards would have to be re-cut).

Batch: the job's ``batch_size`` is per worker, as for data parallelism (the global batch is
``batch_size x workers``)."""

from __future__ import annotations

from pathlib import Path

from jigsaw.model.parallelism import HybridPlan
from jigsaw.oracle.memory import optimizer_state_copies, worker_memory
from worker.hybrid import HybridConfig, HybridStepMetrics, HybridTrainer
from worker.hybrid.checkpoint import load_hybrid, save_hybrid
from worker.hybrid.evaluate import evaluate_hybrid
from worker.runtime.lease_trainer import FixedPlanLease, OnIteration, RunOutcome
from worker.runtime.messages import GangConfig
from worker.saved_bytes import tensor_bytes
from worker.spb.collectives import Collectives


class HybridLease(FixedPlanLease):
    kind = "hybrid"

    def __init__(self, config: GangConfig, collectives: Collectives, device: str) -> None:
        plan = config.plan
        if not isinstance(plan, HybridPlan):
            raise TypeError(f"the hybrid engine cannot run {plan!r}")
        self.rank = collectives.rank
        self.trainer = HybridTrainer(
            HybridConfig(
                model=config.model,
                plan=plan,
                batch_size=config.batch_size,
                lr=config.learning_rate,
                seed=config.seed,
                device=device,
            ),
            collectives,
        )
        self.num_blocks = plan.num_blocks
        self.device = self.trainer.device

    @property
    def metric(self) -> str:
        return "accuracy" if self.trainer.workload.metric == "accuracy" else "eval_loss"

    def run(self, iterations: int, on_iteration: OnIteration) -> RunOutcome:
        steps: list[HybridStepMetrics] = []
        for _ in range(iterations):
            steps.append(self.trainer.step())
            on_iteration(self.trainer.iteration)
        peak = max(
            (s.param_bytes + s.gradient_bytes + s.optimizer_bytes + s.activation_bytes)
            for s in steps
        )
        return RunOutcome(
            iterations=len(steps),
            losses=tuple(s.loss for s in steps),
            samples=len(steps) * self.trainer.config.batch_size,
            compute_s=sum(s.wall_s for s in steps),
            sync_s=0.0,
            iteration_s=sum(s.wall_s for s in steps),
            saved_activation_bytes=max(s.activation_bytes for s in steps),
            peak_memory_bytes=peak,
            bytes_sent=sum(s.bytes_sent for s in steps),
        )

    def static_memory_bytes(self) -> int:
        return worker_memory(
            tensor_bytes(self.trainer.params),
            optimizer_copies=optimizer_state_copies(momentum=self.trainer.config.momentum),
        ).model_bytes

    def save_checkpoint(self, directory: Path) -> None:
        save_hybrid(self.trainer, directory)

    def load_checkpoint(self, directory: Path) -> None:
        load_hybrid(self.trainer, directory)

    def evaluate(self, max_samples: int | None) -> float | None:
        score = evaluate_hybrid(self.trainer, max_samples)
        return score if self.rank == 0 else None
