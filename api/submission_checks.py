"""What a submission must mean, beyond its shape: one code path for ``POST /jobs`` and
``POST /jobs:validate``. Each check raises :class:`InvalidSpecError` naming the field to fix.

1. ``model`` is a zoo model of the catalog (:mod:`jigsaw.catalog`), or an entrypoint with the
   ``package.module:function`` syntax, identifier parts only. A trace alias (``bert``,
   ``cifar10``) is a simulation-only catalog entry no worker can train: refused. An
   entrypoint's block count K is unknown until its first lease, so its plan is checked then.
2. ``spb`` is one of the plan forms (:data:`SPB_TEXT`) and, for a zoo model, resolves
   against the model's K: every depth in ``0..K-1``, ``uniform:k`` with ``k < K``, one depth
   per worker.
3. ``parallelism``: ``pipeline``/``hybrid`` need a zoo model (a profile to plan from); for a
   zoo model the oracle's plan-type choice must find a plan that fits the per-worker memory
   limit (``JIGSAW_WORKER_MEMORY_GIB``), else the message names the limit and each need.
4. ``workers`` fits the cluster's GPUs (all nodes the scheduler recorded, or ``JIGSAW_GPUS``
   before it recorded any) and every quota the job is subject to.
"""

from __future__ import annotations

import re

from jigsaw.catalog import ModelKind, default_catalog, is_entrypoint
from jigsaw.domain import JobSpec
from jigsaw.errors import InvalidPlanError, InvalidSpecError
from jigsaw.oracle.plan_choice import PlanTypeChooser
from jigsaw.plan import Plan
from jigsaw.profiles import ZOO_MODELS

SPB_TEXT = re.compile(
    r"^(none|staircase|auto|uniform:[0-9]{1,7}|([0-9]{1,7} *, *)*0{1,7}( *, *[0-9]{1,7})*)$"
)
"""Every ``spb`` string the API takes (the OpenAPI schema states the same pattern): a named
plan, or depths of at most 7 digits of which one is 0 (block 1 must be trained)."""


def zoo_block_count(model: str) -> int | None:
    """K of a trainable catalog model; None for an entrypoint (K comes at its first lease).
    Raises naming ``model`` for anything else."""
    entry = default_catalog().find(model)
    if entry is None and ":" in model:
        raise InvalidSpecError(
            f"model {model[:80]!r} is not a valid entrypoint: use package.module:function "
            "with identifier parts only (letters, digits, _; not starting with a digit)",
            field="model",
        )
    if entry is None or entry.kind is ModelKind.TRACE:
        raise InvalidSpecError(
            f"unknown model {model[:80]!r}: choose a zoo model ({', '.join(ZOO_MODELS)}), "
            "or give your own as package.module:function (identifier parts only)",
            field="model",
        )
    return entry.num_blocks


def check_spb_text(spb: str) -> None:
    if SPB_TEXT.fullmatch(spb) is None:
        raise InvalidSpecError(
            f"unknown plan {spb[:60]!r}: use none, staircase, uniform:k, auto, or "
            "comma-separated depths such as 0,1,2,3 (lower case, at most 7 digits each)",
            field="spb",
        )


def check_plan(spec: JobSpec, num_blocks: int) -> Plan:
    """The plan ``spec.spb`` resolves to on a ``num_blocks``-block model (``auto``: full
    backprop, the policy picks at start)."""
    try:
        spec.plan_request.check_blocks(num_blocks)
        return spec.plan_request.resolve(spec.workers, num_blocks)
    except InvalidPlanError as error:
        raise InvalidSpecError(
            f"spb {spec.spb!r} does not fit model {spec.model!r} ({num_blocks} blocks): {error}",
            field="spb",
        ) from None


def check_parallelism(spec: JobSpec, chooser: PlanTypeChooser | None) -> Plan | None:
    """The pipeline or hybrid plan the spec's ``parallelism`` resolves to, or ``None`` for
    data parallelism. Raises naming ``parallelism`` when the type cannot run this model or
    nothing it allows fits the memory limit."""
    if spec.parallelism in ("pipeline", "hybrid") and is_entrypoint(spec.model):
        raise InvalidSpecError(
            f"parallelism {spec.parallelism!r} needs a zoo model with a profile to plan "
            f"stages from; {spec.model[:80]!r} is an entrypoint: use parallelism data",
            field="parallelism",
        )
    if chooser is None or is_entrypoint(spec.model):
        return None
    choice = chooser.choice(spec)
    return choice.chosen.plan if choice is not None else None


def check_gang_fits(spec: JobSpec, cluster_gpus: int) -> None:
    if spec.workers > cluster_gpus:
        raise InvalidSpecError(
            f"workers={spec.workers} can never start: the cluster has {cluster_gpus} GPUs in all "
            f"and every worker needs one; ask for at most {cluster_gpus} workers",
            field="workers",
        )


def check_quota(spec: JobSpec, why_never_fits: str | None) -> None:
    if why_never_fits is not None:
        raise InvalidSpecError(
            f"workers={spec.workers} can never start: {why_never_fits}", field="workers"
        )


def check_submission(
    spec: JobSpec,
    *,
    cluster_gpus: int,
    why_never_fits: str | None,
    chooser: PlanTypeChooser | None = None,
) -> Plan | None:
    """Every meaning check, in the order a user would fix them. Returns the resolved plan for
    a zoo model (its pipeline or hybrid plan when that is the chosen type), None for an
    entrypoint (resolved at its first lease)."""
    blocks = zoo_block_count(spec.model)
    plan = check_plan(spec, blocks) if blocks is not None else None
    typed = check_parallelism(spec, chooser)
    plan = typed if typed is not None else plan
    check_gang_fits(spec, cluster_gpus)
    check_quota(spec, why_never_fits)
    return plan
