"""The rows ``bench.sim_gain`` can run: each a policy, its ``--policy-options`` and its
``--eta``; the peers; and the rows rerun under ``--interference`` (bench/sim_gain.py's
docstring says what each ablation row turns off)."""

from __future__ import annotations

from typing import Any

PEERS = ("fifo", "las", "maxmin", "timeslice", "pollux")
ROWS: dict[str, tuple[str, dict[str, Any], str]] = {
    "fifo": ("fifo", {}, "table"),
    "las": ("las", {}, "table"),
    "maxmin": ("maxmin", {}, "table"),
    "timeslice": ("timeslice", {}, "table"),
    "pollux": ("pollux", {}, "table"),
    "jigsaw": ("jigsaw", {}, "table"),
    "jigsaw-noguests": ("jigsaw", {"config": {"guests": False}}, "table"),
    "jigsaw-nohosts": ("jigsaw", {"config": {"hosts": False}}, "table"),
    "jigsaw-noguard": ("jigsaw", {"config": {"completion_guard": False}}, "table"),
    "jigsaw-oracle": ("jigsaw", {"config": {"knowledge": "oracle"}}, "table"),
    "jigsaw-p05": ("jigsaw", {"config": {"fairness_power": -0.5}}, "table"),
    "jigsaw-p1": ("jigsaw", {"config": {"fairness_power": -1.0}}, "table"),
    "jigsaw-unweighted": ("jigsaw", {"config": {"service_weight": 0.0}}, "table"),
    "jigsaw-eta1": ("jigsaw", {}, "one"),
    "jigsaw-noshortest": ("jigsaw", {"config": {"remaining_weight": 0.0}}, "table"),
    "jigsaw-nolongest": ("jigsaw", {"config": {"protect_longest": False}}, "table"),
    "jigsaw-longest-only": ("jigsaw", {"config": {"critical_share": 0.0}}, "table"),
    "jigsaw-nohold": ("jigsaw", {"config": {"critical_hold": 0.0}}, "table"),
    "jigsaw-noshortest-nolongest": (
        "jigsaw",
        {"config": {"remaining_weight": 0.0, "protect_longest": False}},
        "table",
    ),
    "jigsaw-pollux-like": (
        "jigsaw",
        {
            "config": {
                "guests": False,
                "hosts": False,
                "fairness_power": -1.0,
                "service_weight": 0.0,
                "remaining_weight": 0.0,
                "protect_longest": False,
            }
        },
        "table",
    ),
}
"""Row label: (policy, its ``--policy-options``, ``--eta``)."""
INTERFERENCE_ROWS = ("jigsaw", "timeslice")
