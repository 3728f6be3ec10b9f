"""SPB (Structured Partial Backpropagation) training engine.

Typical use on rank ``r`` of an ``n``-rank job (what the Ray executor's actors do)::

    collectives = init_distributed(rank, world_size, "host:port")   # gloo on CPU, NCCL on GPU
    plan = model_plan("staircase", world_size, "resnet18_32")   # an SPBPlan for this K
    trainer = SPBTrainer(TrainerConfig(model="resnet18_32", plan=plan), collectives)
    metrics = trainer.run(k)                        # one lease of k iterations
    trainer.schedule_plan(model_plan("uniform:2", world_size, "resnet18_32"), apply_at=t)
    trainer.save_checkpoint(path); trainer.load_checkpoint(path)

See docs/SPB.md for the algorithm, communication scheme and checkpoint format.
"""

from worker.spb.checkpoint import CheckpointError
from worker.spb.collectives import CollectiveError, Collectives, TrafficCounter
from worker.spb.instrumentation import IterationMetrics
from worker.spb.launch import spawn_local
from worker.spb.model_plans import model_plan
from worker.spb.schedule import BlockRoute, CommSchedule
from worker.spb.thread_collectives import ThreadCollectives, ThreadGroup, run_threads
from worker.spb.torch_collectives import TorchCollectives, init_distributed, shutdown_distributed
from worker.spb.trainer import PlanSwitchError, SPBTrainer
from worker.spb.trainer_setup import TrainerConfig

__all__ = [
    "BlockRoute",
    "CheckpointError",
    "CollectiveError",
    "Collectives",
    "CommSchedule",
    "IterationMetrics",
    "PlanSwitchError",
    "SPBTrainer",
    "ThreadCollectives",
    "ThreadGroup",
    "TorchCollectives",
    "TrafficCounter",
    "TrainerConfig",
    "init_distributed",
    "model_plan",
    "run_threads",
    "shutdown_distributed",
    "spawn_local",
]
