"""The plan type of a job that trains with an optimizer other than SGD (``optimizer: adamw``).

Only the data-parallel engine builds its optimizer from the job (``worker/spb/trainer.py``);
the pipeline and hybrid engines train with SGD. So such a job runs data parallel, even under
``parallelism: auto``, and its memory is predicted with its own optimizer's state: AdamW keeps
two tensors the size of the parameters (its moments) where SGD keeps one (the momentum), so a
model that fits with SGD may not fit with AdamW
(:func:`jigsaw.oracle.memory.optimizer_state_copies`).
"""

from __future__ import annotations

from jigsaw.model.domain import JobSpec
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.hardware import HardwareSpec
from jigsaw.model.profiles import ModelProfile
from jigsaw.model.sizes import human_bytes
from jigsaw.oracle.memory import optimizer_state_copies
from jigsaw.oracle.plan_alternatives import Alternative
from jigsaw.oracle.plan_choice import NoPlanFitsError, PlanChoice
from jigsaw.oracle.plan_predictions import predict_data_parallel


def extra_state_bytes(param_bytes: int, optimizer: str) -> int:
    """What a worker holding ``param_bytes`` of parameters keeps for ``optimizer`` beyond the
    SGD state the oracle's per-rank SPB figures count (AdamW: one more copy)."""
    return (optimizer_state_copies(optimizer) - optimizer_state_copies()) * param_bytes


def data_only_choice(
    spec: JobSpec, profile: ModelProfile, hardware: HardwareSpec, limit: int
) -> PlanChoice | InvalidSpecError:
    """Data parallelism with ``spec.optimizer``'s state, or the error naming what to fix when
    it does not fit the per-worker memory limit ``limit``."""
    prediction = predict_data_parallel(
        profile, hardware, spec.workers, spec.batch_size, spec.optimizer
    )
    data = Alternative("data", None, prediction, prediction.fits(limit))
    if not data.fits:
        return _does_not_fit(spec, profile, hardware, limit, data)
    reason = (
        f"optimizer {spec.optimizer} runs on the data-parallel engine only"
        if spec.parallelism == "auto"
        else f"parallelism {spec.parallelism} requested"
    )
    return PlanChoice(spec.parallelism, data, (data,), limit, reason)


def _does_not_fit(
    spec: JobSpec, profile: ModelProfile, hardware: HardwareSpec, limit: int, data: Alternative
) -> NoPlanFitsError:
    need = human_bytes(data.prediction.max_model_bytes)
    copies = optimizer_state_copies(spec.optimizer)
    said = (
        f"with optimizer {spec.optimizer} (its state: {copies} tensors the size of the "
        f"parameters) {data.describe()} needs {need} per worker, over the per-worker memory "
        f"limit of {human_bytes(limit)} (JIGSAW_WORKER_MEMORY_GIB)"
    )
    at_one = predict_data_parallel(profile, hardware, spec.workers, 1, spec.optimizer)
    if spec.batch_size > 1 and at_one.fits(limit):
        return NoPlanFitsError(
            f"at batch_size {spec.batch_size} {said}. Use a smaller batch_size (one sample "
            "per worker fits), optimizer sgd, or a larger limit",
            field="batch_size",
        )
    return NoPlanFitsError(
        f"{said}, at any batch. Use optimizer sgd (which can also run the model as a "
        "pipeline or hybrid that splits it over the workers), or a larger limit",
        field="optimizer",
    )
