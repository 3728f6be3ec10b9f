"""PipeDream-2BW pipeline training (and a GPipe-style flush baseline) over the SPB engine's
collectives seam: point-to-point sends between stages, all-reduce across pipeline replicas.
See docs/PARALLELISM.md."""

from worker.pipeline.engine import PipelineConfig, PipelineRunMetrics, PipelineTrainer

__all__ = ["PipelineConfig", "PipelineRunMetrics", "PipelineTrainer"]
