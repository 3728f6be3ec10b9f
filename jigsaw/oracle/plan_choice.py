"""Which plan type a job runs: data parallel (SPB or not), a pipeline, or a hybrid.

A pure function of the model profile, the hardware spec, the worker count, the per-worker
batch and a per-worker memory limit. It predicts every alternative (data, a pipeline per
stage count, the hybrid: :mod:`jigsaw.oracle.plan_alternatives`), all at the job's global
batch (workers x batch).

Alternatives are ranked by *goodput*: predicted samples per second x statistical
efficiency η. Data parallelism, GPipe and the hybrid are exact synchronous SGD over the
global batch (η = 1); a PipeDream-2BW pipeline applies each update one step late, and its η
at the job's learning rate and momentum comes from :mod:`jigsaw.efficiency.pipeline`
(the model's measured delay sensitivity, else the most sensitive measured; ``lr=None``: η is
not known and taken as 1, samples per second alone).

Under ``auto`` it keeps data parallelism when it fits, unless a fitting alternative is
predicted to deliver more than ``1 + margin`` times its goodput: the oracle's
iteration-time target is 15%, a smaller predicted gain is within its error, and a
data-parallel job keeps the SPB slack JigSaw packs other jobs into. A model that does not fit
one worker under data parallelism gets the fitting alternative with the best predicted
goodput; when nothing fits, :class:`NoPlanFitsError` names the limit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from jigsaw.efficiency.pipeline import ENGINE_MOMENTUM, model_pipeline_eta
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.hardware import HardwareSpec
from jigsaw.model.parallelism import PARALLELISM_CHOICES, HybridPlan, PipelinePlan
from jigsaw.model.profiles import ModelProfile
from jigsaw.model.sizes import human_bytes
from jigsaw.model.wording import counted
from jigsaw.oracle.parallel_profile import ParallelProfile
from jigsaw.oracle.plan_alternatives import Alternative, alternatives, hybrid_refusal, hybrid_suffix

AUTO_MARGIN = 0.15


class NoPlanFitsError(InvalidSpecError):
    """No plan type the job allows fits the per-worker memory limit. The field is
    ``batch_size`` when a smaller batch would fit (the batch is what to fix), else
    ``parallelism``."""

    def __init__(self, message: str, field: str = "parallelism") -> None:
        super().__init__(message, field=field)


@dataclass(frozen=True, slots=True)
class PlanChoice:
    requested: str
    chosen: Alternative
    alternatives: tuple[Alternative, ...]
    memory_limit_bytes: int
    reason: str


def choose_plan(
    profile: ModelProfile,
    parallel: ParallelProfile | None,
    hardware: HardwareSpec,
    workers: int,
    batch: int,
    memory_limit_bytes: int,
    parallelism: str = "auto",
    margin: float = AUTO_MARGIN,
    *,
    lr: float | None = None,
    momentum: float = ENGINE_MOMENTUM,
) -> PlanChoice:
    """The plan type a job of ``workers`` x ``batch`` runs under ``parallelism``, trained
    with SGD at ``lr`` and ``momentum`` (``lr=None``: every η taken as 1).

    ``parallel`` is ``None`` when the profile lacks block output sizes: data only.
    Raises :class:`InvalidSpecError` on ``parallelism`` when the requested type cannot be
    predicted or built for this model, :class:`NoPlanFitsError` when nothing allowed fits.
    """
    if parallelism not in PARALLELISM_CHOICES:
        raise InvalidSpecError(
            f"parallelism must be one of {', '.join(PARALLELISM_CHOICES)}, got {parallelism!r}",
            field="parallelism",
        )
    if parallelism in ("pipeline", "hybrid") and parallel is None:
        raise InvalidSpecError(
            f"parallelism {parallelism!r} needs a model profile with block output sizes; "
            f"model {profile.model!r} has none: use parallelism data",
            field="parallelism",
        )
    every = tuple(
        with_efficiency(a, profile.model, lr, momentum)
        for a in alternatives(profile, parallel, hardware, workers, batch, memory_limit_bytes)
    )
    allowed = [a for a in every if parallelism == "auto" or a.kind == parallelism]
    if not allowed:
        raise InvalidSpecError(
            f"parallelism {parallelism!r} has no plan for model {profile.model!r} on "
            f"{workers} worker(s): {_why_none(parallelism, parallel, workers)}",
            field="parallelism",
        )
    fitting = [a for a in allowed if a.fits]
    if not fitting:
        smaller = batch > 1 and _fits_at_batch_one(
            profile, parallel, hardware, workers, memory_limit_bytes, parallelism
        )
        raise NoPlanFitsError(
            _nothing_fits(allowed, memory_limit_bytes, parallelism, batch if smaller else None),
            field="batch_size" if smaller else "parallelism",
        )
    best, reason = _pick(
        fitting, every[0], parallelism, margin, memory_limit_bytes, lr=lr, momentum=momentum
    )
    return PlanChoice(parallelism, best, every, memory_limit_bytes, reason)


def _pick(
    fitting: list[Alternative],
    data: Alternative,
    parallelism: str,
    margin: float,
    memory_limit_bytes: int,
    *,
    lr: float | None,
    momentum: float,
) -> tuple[Alternative, str]:
    """The alternative a job runs among those that fit, and the reason a user reads: under
    ``auto``, data parallelism unless another type is predicted over ``margin`` above it."""
    best = max(fitting, key=lambda a: a.goodput)
    if parallelism == "auto" and data.fits:
        if best.goodput > (1.0 + margin) * data.goodput:
            reason = (
                f"{best.kind} is predicted {best.goodput / data.goodput:.2f}x the goodput of "
                f"data parallelism, over the {margin:.0%} margin"
                f"{_goodput_terms(best, data, lr, momentum)}"
                f"{_passed_over(fitting, best, best.samples_per_s, lr, momentum)}"
            )
        else:
            reason = "data parallelism fits; no alternative is predicted over "
            reason += f"{1 + margin:.2f}x its goodput (samples/s x η)"
            over_margin = (1.0 + margin) * data.samples_per_s
            reason += _passed_over(fitting, data, over_margin, lr, momentum)
            best = data
    elif parallelism == "auto":
        reason = (
            f"data parallelism needs {human_bytes(data.prediction.max_model_bytes)} per worker, "
            f"over the {human_bytes(memory_limit_bytes)} limit; {best.kind} fits and has the "
            f"best goodput of those that do{_efficiency_note(best, lr, momentum)}"
            f"{_passed_over(fitting, best, best.samples_per_s, lr, momentum)}"
        )
    else:
        reason = f"parallelism {parallelism} requested{_efficiency_note(best, lr, momentum)}"
    return best, reason


def plan_efficiency(
    plan: PipelinePlan | HybridPlan | None, model: str, lr: float | None, momentum: float
) -> float:
    """η of ``model`` under a plan trained with SGD at ``lr`` and ``momentum``: 1 for exact
    synchronous SGD (data, GPipe, hybrid), the model of 2BW's one-step-delayed update
    (:func:`~jigsaw.efficiency.pipeline.model_pipeline_eta`) for a 2BW pipeline; 1 when
    ``lr`` is not known."""
    if lr is None or not updates_one_step_late(plan):
        return 1.0
    return model_pipeline_eta(model, lr, momentum)


def updates_one_step_late(plan: PipelinePlan | HybridPlan | None) -> bool:
    """A PipeDream-2BW pipeline: its update uses the gradient of the previous weights."""
    return isinstance(plan, PipelinePlan) and plan.schedule == "2bw"


def with_efficiency(
    alternative: Alternative, model: str, lr: float | None, momentum: float
) -> Alternative:
    efficiency = plan_efficiency(alternative.plan, model, lr, momentum)
    return replace(alternative, efficiency=efficiency)


def _settings(lr: float | None, momentum: float) -> str:
    return f"lr {lr:g}, momentum {momentum:g}"


def _delayed(alternative: Alternative, lr: float | None) -> bool:
    """Whether ``alternative`` is a 2BW pipeline priced at a known learning rate."""
    return lr is not None and updates_one_step_late(alternative.plan)


def _goodput_terms(best: Alternative, data: Alternative, lr: float | None, mu: float) -> str:
    if not _delayed(best, lr):
        return ""
    return (
        f" ({best.samples_per_s / data.samples_per_s:.2f}x its samples/s at η "
        f"{best.efficiency:.2f}: 2BW's one-step weight delay at {_settings(lr, mu)})"
    )


def _passed_over(
    fitting: list[Alternative],
    chosen: Alternative,
    samples_per_s: float,
    lr: float | None,
    mu: float,
) -> str:
    """The fastest alternative over ``samples_per_s`` that η kept from being chosen (the
    one that ranking by samples/s alone would have taken), with its η; empty if none."""
    faster = [a for a in fitting if a.samples_per_s > samples_per_s and a is not chosen]
    if not faster:
        return ""
    fastest = max(faster, key=lambda a: a.samples_per_s)
    return (
        f"; {fastest.kind} is predicted {fastest.samples_per_s / chosen.samples_per_s:.2f}x "
        f"the samples/s of {chosen.kind}, but at η {fastest.efficiency:.2f} (2BW's one-step "
        f"weight delay at {_settings(lr, mu)}) only {fastest.goodput / chosen.goodput:.2f}x "
        "its goodput"
    )


def _efficiency_note(chosen: Alternative, lr: float | None, mu: float) -> str:
    if not _delayed(chosen, lr):
        return ""
    return (
        f" (η {chosen.efficiency:.2f}: 2BW's one-step weight delay at {_settings(lr, mu)} "
        f"makes {chosen.samples_per_s:.0f} samples/s worth {chosen.goodput:.0f})"
    )


def _why_none(parallelism: str, parallel: ParallelProfile | None, workers: int) -> str:
    blocks = parallel.blocks.num_blocks if parallel is not None else 0
    if parallelism == "pipeline":
        return (
            f"a pipeline needs a stage count of 2..{blocks} (the model's blocks) that divides "
            f"{counted(workers, 'worker')}"
        )
    plan = hybrid_suffix(parallel, workers) if parallel is not None else None
    refusal = hybrid_refusal(parallel, plan) if parallel is not None and plan else None
    if refusal is not None:
        return (
            "a hybrid shards the output-side linear layers across every worker, and "
            f"{refusal}: ask for fewer workers"
        )
    return "a hybrid needs at least 2 workers and linear layers in the model's last block"


def _fits_at_batch_one(
    profile: ModelProfile,
    parallel: ParallelProfile | None,
    hardware: HardwareSpec,
    workers: int,
    limit: int,
    parallelism: str,
) -> bool:
    """Whether an allowed plan type fits at one sample per worker: then the batch is what
    makes the job too big, not the model."""
    every = alternatives(profile, parallel, hardware, workers, 1, limit)
    return any(a.fits for a in every if parallelism == "auto" or a.kind == parallelism)


def _nothing_fits(
    allowed: list[Alternative], limit: int, parallelism: str, batch: int | None
) -> str:
    needs = "; ".join(
        f"{a.describe()} needs {human_bytes(a.prediction.max_model_bytes)}" for a in allowed
    )
    subject = (
        "no plan type fits" if parallelism == "auto" else f"parallelism {parallelism} does not fit"
    )
    advice = "Use more workers, a smaller batch_size, or a larger limit"
    if batch is not None:
        subject = f"at batch_size {batch} {subject}"
        advice = (
            "Use a smaller batch_size (one sample per worker fits), more workers, or a larger limit"
        )
    return (
        f"{subject} the per-worker memory limit of {human_bytes(limit)} "
        f"(JIGSAW_WORKER_MEMORY_GIB): {needs}. {advice}"
    )
