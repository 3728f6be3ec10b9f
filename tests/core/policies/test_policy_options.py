"""JIGSAW_POLICY_OPTIONS: JSON values become the policies' config objects, mistakes are named."""

from __future__ import annotations

import pytest

from jigsaw.model.errors import InvalidSpecError
from jigsaw.planning.planner import Planner
from jigsaw.policies import create_policy
from jigsaw.policies.jigsaw import JigsawConfig
from jigsaw.policies.options import merged_options, policy_options
from jigsaw.policies.shared.fairness import LasConfig
from jigsaw.policies.timeslice import TimesliceConfig
from jigsaw.simulator.semantics import GAVEL, JIGSAW, POLLUX, TIRESIAS


def test_las_config_from_json() -> None:
    options = policy_options(
        "las", {"min_run_s": 60, "config": {"thresholds": [600, 6000], "promote_knob": 2}}
    )
    assert options["config"] == LasConfig(thresholds=(600.0, 6000.0), promote_knob=2)
    policy = create_policy("las", planner=Planner(), **options)
    assert policy.config.thresholds == (600.0, 6000.0)  # type: ignore[attr-defined]
    assert policy.min_run_s == 60  # type: ignore[attr-defined]


def test_timeslice_config_with_nested_las() -> None:
    options = policy_options(
        "timeslice", {"config": {"load_threshold": 1.5, "las": {"promote_floor_s": 60}}}
    )
    config = options["config"]
    assert isinstance(config, TimesliceConfig)
    assert config.load_threshold == 1.5
    assert config.las == LasConfig(promote_floor_s=60)


def test_jigsaw_config_from_json_takes_the_ablation_switches() -> None:
    """The table's ablation rows as JSON: JSON's -1 is an int, the option a float."""
    options = policy_options(
        "jigsaw",
        {"config": {"guests": False, "hosts": False, "fairness_power": -1, "knowledge": "oracle"}},
    )
    assert options["config"] == JigsawConfig(
        guests=False, hosts=False, fairness_power=-1.0, knowledge="oracle"
    )
    assert isinstance(options["config"].fairness_power, float)


@pytest.mark.parametrize(
    ("policy", "raw", "message"),
    [
        ("las", {"min_run": 5}, "policy 'las' has no option 'min_run'; its options: config"),
        ("fifo", {"min_run_s": 5}, "policy 'fifo' has no option 'min_run_s'; its options: ranking"),
        ("las", {"oracle": 1}, "has no option 'oracle'"),
        ("las", {"config": {"thresholds": [10, 5]}}, "las.config: LAS thresholds must be"),
        ("timeslice", {"config": {"las": {"knob": 1}}}, "timeslice.config.las has no option"),
        ("timeslice", {"config": {"load_threshold": 9}}, "load_threshold must be in"),
        ("jigsaw", {"config": {"pack_gain": 0.1}}, "jigsaw.config has no option 'pack_gain'"),
        ("jigsaw", {"config": {"fairness_power": 0.5}}, "fairness_power must be negative"),
        ("jigsaw", {"config": {"knowledge": "magic"}}, "knowledge must be one of"),
        ("sjf", {}, "unknown policy 'sjf'"),
    ],
)
def test_bad_options_name_what_to_fix(policy: str, raw: dict, message: str) -> None:
    with pytest.raises(InvalidSpecError, match=message.replace("(", r"\(")):
        policy_options(policy, raw)


def test_user_options_change_only_what_they_name_of_the_semantics_config() -> None:
    """Under Pollux's semantics timeslice's config carries Tiresias' queues and no protection;
    ``{"config": {"pack_gain": 0.1, "las": {"promote_knob": 2}}}`` keeps both; jigsaw's
    carries the restart Pollux charges, and ``{"config": {"guests": false}}`` keeps it."""
    base = POLLUX.policy_options["timeslice"]
    merged = merged_options(base, {"config": {"pack_gain": 0.1, "las": {"promote_knob": 2}}})
    config = policy_options("timeslice", merged)["config"]
    assert config.pack_gain == 0.1 and config.min_run_s == 0.0
    assert config.las.thresholds == TIRESIAS.thresholds and config.las.promote_knob == 2
    jigsaw = POLLUX.policy_options["jigsaw"]
    chosen = policy_options("jigsaw", merged_options(jigsaw, {"config": {"guests": False}}))
    assert chosen["config"] == JigsawConfig(
        guests=False, restart_s=30.0, launch_s=30.0, min_run_s=0.0, protect_longest=False
    )
    replaced = merged_options(jigsaw, {"config": JigsawConfig()})  # an object replaces it whole
    assert replaced["config"] == JigsawConfig()


def test_the_default_weighs_work_left_and_only_jigsaws_semantics_protect_the_longest() -> None:
    """The default objective (docs/SCHEDULER.md, "Options"): shortest remaining work first
    everywhere; the critical path kept running under jigsaw's semantics, not under Pollux's
    or Gavel's, whose policies protect nobody (as their ``min_run_s`` is 0)."""
    assert JigsawConfig().remaining_weight == 64.0 and JigsawConfig().protect_longest
    configs = {s.name: s.policy_options["jigsaw"]["config"] for s in (JIGSAW, POLLUX, GAVEL)}
    assert {name: c.remaining_weight for name, c in configs.items()} == dict.fromkeys(configs, 64.0)
    assert {name: c.protect_longest for name, c in configs.items()} == {
        "jigsaw": True,
        "pollux": False,
        "gavel": False,
    }
    assert {name: c.min_run_s > 0 for name, c in configs.items()} == {
        "jigsaw": True,
        "pollux": False,
        "gavel": False,
    }
