"""One policy builder for the simulator and the service.

A registered policy declares what it uses of the cluster's models (``uses`` in
:func:`~jigsaw.policies.base.register`): the oracle (jigsaw prices plans with it) or the
models' block counts (the gang policies resolve plans with them). The builder supplies those,
turns JSON options into config objects (:mod:`jigsaw.policies.options`) and wraps the policy
in quotas when there are any.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jigsaw.catalog import ModelCatalog
from jigsaw.oracle import Oracle
from jigsaw.policies.base import Policy, registration
from jigsaw.policies.options import policy_options
from jigsaw.policies.plan_resolution import BlocksOf
from jigsaw.policies.quota import QuotaPolicy, Quotas


def build_policy(
    name: str,
    oracle: Oracle,
    options: Mapping[str, Any] | None = None,
    *,
    quotas: Quotas | None = None,
    catalog: ModelCatalog | None = None,
) -> Policy:
    """The registered policy ``name`` with ``options`` (plain JSON values or config objects),
    given what it uses, wrapped in ``quotas`` when they limit anything."""
    entry = registration(name)
    blocks_of: BlocksOf = (catalog or ModelCatalog(oracle.profiles)).num_blocks
    available: dict[str, Any] = {"oracle": oracle, "blocks_of": blocks_of}
    supplied = {key: available[key] for key in entry.uses}
    policy = entry.factory(**supplied, **policy_options(name, dict(options or {})))
    return policy if quotas is None or quotas.empty else QuotaPolicy(policy, quotas)
