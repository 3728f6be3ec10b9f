"""SplitBrain-style hybrid training: data-parallel blocks replicated, the output-side blocks'
linear layers sharded across the group. See docs/PARALLELISM.md."""

from worker.hybrid.engine import HybridConfig, HybridStepMetrics, HybridTrainer

__all__ = ["HybridConfig", "HybridStepMetrics", "HybridTrainer"]
