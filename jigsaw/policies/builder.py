"""One policy builder for the simulator and the service.

A registered policy declares what it uses (``uses`` in :func:`~jigsaw.policies.base.register`):
the oracle (jigsaw prices plans with it), the planner (every policy asks it what plan a job
starts with, :mod:`jigsaw.planning.planner`) and the goodput source (what jobs have measured;
the same one, or none, for every policy that uses it). The builder supplies those, turns
JSON options into config objects (:mod:`jigsaw.policies.options`) and wraps the policy in
quotas when there are any.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jigsaw.goodput.source import GoodputSource
from jigsaw.oracle import Oracle
from jigsaw.planning.catalog import ModelCatalog
from jigsaw.planning.planner import Planner
from jigsaw.policies.base import Policy, registration
from jigsaw.policies.options import policy_options
from jigsaw.policies.quota import QuotaPolicy, Quotas


def build_policy(
    name: str,
    oracle: Oracle,
    options: Mapping[str, Any] | None = None,
    *,
    planner: Planner | None = None,
    quotas: Quotas | None = None,
    goodput: GoodputSource | None = None,
) -> Policy:
    """The registered policy ``name`` with ``options`` (plain JSON values or config objects),
    given what it uses, wrapped in ``quotas`` when they limit anything. Without a
    ``planner``, one for the oracle's hardware and models (the GPU type's memory as the
    per-worker limit): what the simulator plans a trace's jobs with. ``goodput`` goes to every
    policy that uses it (``None``: no measurements, the policy falls back on its prior)."""
    entry = registration(name)
    if planner is None:
        planner = Planner(oracle.hardware, catalog=ModelCatalog(oracle.profiles))
    available: dict[str, Any] = {"oracle": oracle, "planner": planner, "goodput": goodput}
    supplied = {key: available[key] for key in entry.uses}
    policy = entry.factory(**supplied, **policy_options(name, dict(options or {})))
    return policy if quotas is None or quotas.empty else QuotaPolicy(policy, quotas)
