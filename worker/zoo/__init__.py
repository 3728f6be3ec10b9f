"""Model and data zoo: blocked models registered by the names the scheduler uses.

``load_workload("resnet18_32")`` or ``load_workload("mypkg.models:build")``; see docs/MODELS.md.
"""

from worker.zoo.workload import (
    DataSplits,
    SampleDataset,
    TensorPairDataset,
    UnknownModelError,
    Workload,
    list_models,
    load_workload,
    register,
)

__all__ = [
    "DataSplits",
    "SampleDataset",
    "TensorPairDataset",
    "UnknownModelError",
    "Workload",
    "list_models",
    "load_workload",
    "register",
]
