"""Scheduling policies, registered by name. Importing this package registers them all."""

from jigsaw.policies import fifo, jigsaw, las, maxmin, pollux, timeslice
from jigsaw.policies.base import Policy, create_policy, policy_names, register

__all__ = [
    "Policy",
    "create_policy",
    "fifo",
    "jigsaw",
    "las",
    "maxmin",
    "policy_names",
    "pollux",
    "register",
    "timeslice",
]
