"""What a submission must mean, beyond its shape: one code path for ``POST /jobs`` and
``POST /jobs:validate``. Each check raises :class:`InvalidSpecError` naming the field to fix.

The plan text itself (``spb``) is parsed once, by :meth:`jigsaw.model.plan.PlanRequest.parse`, when
the spec is built. Then:

1. ``model`` is a zoo model of the planner's catalog (:mod:`jigsaw.planning.catalog`), or an
   entrypoint with the ``package.module:function`` syntax, identifier parts only. A trace
   alias (``bert``, ``cifar10``) is a simulation-only catalog entry no worker can train:
   refused.
2. The plan: every rule the engines enforce, asked of the service's one planner
   (:meth:`jigsaw.planning.planner.Planner.check`): ``spb`` resolves against the model's K;
   ``parallelism`` finds a plan type the engines can build for this model and worker count
   (a hybrid's sharded layers are wide enough for every worker) that fits the per-worker
   memory limit (``JIGSAW_WORKER_MEMORY_GIB``), else the message names the limit and each
   need, on ``batch_size`` when a smaller batch would fit. An entrypoint's K is unknown
   until its first lease, so its plan is checked then.
3. ``workers`` fits the cluster's GPUs (all nodes the scheduler recorded, or ``JIGSAW_GPUS``
   before it recorded any) and every quota the job is subject to.
"""

from __future__ import annotations

from jigsaw.model.domain import JobSpec
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.profiles import ZOO_MODELS
from jigsaw.planning.catalog import ModelCatalog, ModelKind
from jigsaw.planning.planner import Planner


def check_model(spec: JobSpec, catalog: ModelCatalog) -> None:
    """A trainable catalog model or a well-formed entrypoint; refused naming ``model``."""
    model = spec.model
    entry = catalog.find(model)
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
    spec: JobSpec, planner: Planner, *, cluster_gpus: int, why_never_fits: str | None
) -> None:
    """Every meaning check, in the order a user would fix them."""
    check_model(spec, planner.catalog)
    planner.check(spec)
    check_gang_fits(spec, cluster_gpus)
    check_quota(spec, why_never_fits)
