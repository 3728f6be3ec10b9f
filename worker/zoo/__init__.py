"""Model and data zoo: blocked models listed by the names the scheduler uses.

``load_workload("resnet18_32")`` or ``load_workload("mypkg.models:build")``; the zoo's names
are listed in :mod:`worker.zoo.registry`; see docs/MODELS.md.
"""

from worker.zoo.registry import (
    ZOO,
    ModelBuildError,
    UnknownModelError,
    ZooModel,
    list_models,
    load_workload,
)
from worker.zoo.workload import DataSplits, SampleDataset, TensorPairDataset, Workload

__all__ = [
    "ZOO",
    "DataSplits",
    "ModelBuildError",
    "SampleDataset",
    "TensorPairDataset",
    "UnknownModelError",
    "Workload",
    "ZooModel",
    "list_models",
    "load_workload",
]
