"""The lease seam over the PipeDream-2BW engine: each run is ``train(n)``, which drains the
pipeline at its end, so every control point and lease boundary finds it empty (where it can
checkpoint, evaluate or stop). A plan change is refused: stop and restart instead.

Batch: the job's ``batch_size`` is per worker, as for data parallelism, so a replica of S
stages takes ``batch_size x S`` samples per iteration and the global batch is the same as the
data-parallel one (``batch_size x workers``).
"""

from __future__ import annotations

from pathlib import Path

from jigsaw.model.parallelism import PipelinePlan
from jigsaw.oracle.memory import optimizer_state_copies, worker_memory
from worker.pipeline import PipelineConfig, PipelineTrainer
from worker.pipeline.checkpoint import load_pipeline, save_pipeline
from worker.pipeline.evaluate import evaluate_pipeline
from worker.runtime.lease_trainer import FixedPlanLease, OnIteration, RunOutcome
from worker.runtime.messages import GangConfig
from worker.saved_bytes import tensor_bytes
from worker.spb.collectives import Collectives


class PipelineLease(FixedPlanLease):
    kind = "pipeline"

    def __init__(self, config: GangConfig, collectives: Collectives, device: str) -> None:
        plan = config.plan
        if not isinstance(plan, PipelinePlan):
            raise TypeError(f"the pipeline engine cannot run {plan!r}")
        self.rank = collectives.rank
        self.trainer = PipelineTrainer(
            PipelineConfig(
                model=config.model,
                plan=plan,
                batch_size=config.batch_size * plan.num_stages,
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
        return "accuracy" if self.trainer.metric == "accuracy" else "eval_loss"

    def run(self, iterations: int, on_iteration: OnIteration) -> RunOutcome:
        m = self.trainer.train(iterations)
        on_iteration(self.trainer.iteration)
        samples = iterations * self.trainer.config.batch_size if self.trainer.last else 0
        return RunOutcome(
            iterations=iterations,
            losses=tuple(m.losses),
            samples=samples,
            compute_s=m.wall_s,
            sync_s=0.0,
            iteration_s=m.wall_s,
            saved_activation_bytes=m.activation_bytes,
            peak_memory_bytes=(
                m.param_bytes + m.gradient_bytes + m.optimizer_bytes + m.activation_bytes
            ),
            bytes_sent=m.bytes_sent,
        )

    def static_memory_bytes(self) -> int:
        return worker_memory(
            tensor_bytes(self.trainer.module.parameters()),
            weight_versions=self.trainer.plan.weight_versions(),
            optimizer_copies=optimizer_state_copies(momentum=self.trainer.config.momentum),
        ).model_bytes

    def save_checkpoint(self, directory: Path) -> None:
        save_pipeline(self.trainer, directory)

    def load_checkpoint(self, directory: Path) -> None:
        load_pipeline(self.trainer, directory)

    def evaluate(self, max_samples: int | None) -> float | None:
        score = evaluate_pipeline(self.trainer, max_samples)
        return score if self.rank == 0 else None
