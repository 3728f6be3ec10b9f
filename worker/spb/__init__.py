"""SPB (Structured Partial Backpropagation) training engine.

Typical use on rank ``r`` of an ``n``-rank job (what the Ray executor's actors do)::

    collectives = init_distributed(rank, world_size, "host:port")   # gloo on CPU, NCCL on GPU
    trainer = SPBTrainer(TrainerConfig(model="resnet18_32", plan="staircase"), collectives)
    metrics = trainer.run(k)                        # one lease of k iterations
    trainer.schedule_plan("uniform:2", apply_at=t)  # all ranks switch at iteration t
    trainer.save_checkpoint(path); trainer.load_checkpoint(path)

See docs/SPB.md for the algorithm, communication scheme and checkpoint format.
"""

from worker.spb.checkpoint import CheckpointError
from worker.spb.collectives import CollectiveError, Collectives, TrafficCounter
from worker.spb.instrumentation import IterationMetrics
from worker.spb.launch import spawn_local
from worker.spb.schedule import BlockRoute, CommSchedule
from worker.spb.thread_collectives import ThreadCollectives, ThreadGroup, run_threads
from worker.spb.torch_collectives import TorchCollectives, init_distributed, shutdown_distributed
from worker.spb.trainer import PlanSwitchError, SPBTrainer, TrainerConfig

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
    "run_threads",
    "shutdown_distributed",
    "spawn_local",
]
