"""What an elastic submission must mean against the cluster (``min_workers``, ``max_workers``,
``batch_policy``): the checks a spec cannot make alone. The spec itself already refused
``min_workers > max_workers``, ``workers`` outside them, a fixed global batch some size does
not divide, adaptive bounds missing or not holding the initial batch, and an elastic request
with ``parallelism`` pipeline or hybrid (:func:`jigsaw.model.spec_checks.check_elasticity`).

Here, each raising :class:`InvalidSpecError` naming the field to fix:

1. ``max_workers`` fits the cluster's GPUs (a job may never be given more GPUs than exist);
2. ``max_workers`` fits every quota the job is subject to (its queue's, its user's);
3. an elastic ``parallelism: auto`` job whose chosen plan type is pipeline or hybrid is refused:
   only data-parallel gangs resize (their workers hold whole replicas).

A job that gives none of the elastic fields passes untouched.
"""

from __future__ import annotations

from jigsaw.model.domain import JobSpec
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import Plan, SPBPlan
from jigsaw.policies.quota import Quotas


def check_elastic(
    spec: JobSpec, typed_plan: Plan | None, *, cluster_gpus: int, quotas: Quotas
) -> None:
    """``typed_plan``: the pipeline or hybrid plan the planner gives ``spec`` (None: data)."""
    if not spec.is_elastic:
        return
    _low, high = spec.worker_range
    if high > cluster_gpus:
        raise InvalidSpecError(
            f"max_workers={high} is more than the cluster's {cluster_gpus} GPUs (every worker "
            f"needs one): ask for at most {cluster_gpus}",
            field="max_workers",
        )
    for kind, owner, limit in (
        ("queue", spec.queue, quotas.queues.get(spec.queue)),
        ("user", spec.user, quotas.users.get(spec.user)),
    ):
        if limit is not None and high > limit:
            raise InvalidSpecError(
                f"max_workers={high} can never be given: {kind} {owner!r} quota is {limit} "
                f"GPUs; ask for at most {limit}",
                field="max_workers",
            )
    if typed_plan is not None and not isinstance(typed_plan, SPBPlan):
        field = "batch_policy" if spec.batch_policy == "adaptive" else "max_workers"
        raise InvalidSpecError(
            f"parallelism auto chose {typed_plan.describe()} for {spec.model!r}, and only "
            "data-parallel jobs are elastic: set parallelism to data, or drop min_workers, "
            "max_workers and batch_policy",
            field=field,
        )
