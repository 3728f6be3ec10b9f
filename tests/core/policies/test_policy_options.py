"""JIGSAW_POLICY_OPTIONS: JSON values become the policies' config objects, mistakes are named."""

from __future__ import annotations

import pytest

from jigsaw.model.errors import InvalidSpecError
from jigsaw.planning.planner import Planner
from jigsaw.policies import create_policy
from jigsaw.policies.jigsaw import JigsawConfig
from jigsaw.policies.options import merged_options, policy_options
from jigsaw.policies.shared.fairness import LasConfig
from jigsaw.simulator.semantics import POLLUX, TIRESIAS


def test_las_config_from_json() -> None:
    options = policy_options(
        "las", {"min_run_s": 60, "config": {"thresholds": [600, 6000], "promote_knob": 2}}
    )
    assert options["config"] == LasConfig(thresholds=(600.0, 6000.0), promote_knob=2)
    policy = create_policy("las", planner=Planner(), **options)
    assert policy.config.thresholds == (600.0, 6000.0)  # type: ignore[attr-defined]
    assert policy.min_run_s == 60  # type: ignore[attr-defined]


def test_jigsaw_config_with_nested_las() -> None:
    options = policy_options(
        "jigsaw", {"config": {"load_threshold": 1.5, "las": {"promote_floor_s": 60}}}
    )
    config = options["config"]
    assert isinstance(config, JigsawConfig)
    assert config.load_threshold == 1.5
    assert config.las == LasConfig(promote_floor_s=60)


@pytest.mark.parametrize(
    ("policy", "raw", "message"),
    [
        ("las", {"min_run": 5}, "policy 'las' has no option 'min_run'; its options: config"),
        ("fifo", {"min_run_s": 5}, "policy 'fifo' has no option 'min_run_s'; its options: ranking"),
        ("las", {"oracle": 1}, "has no option 'oracle'"),
        ("las", {"config": {"thresholds": [10, 5]}}, "las.config: LAS thresholds must be"),
        ("jigsaw", {"config": {"las": {"knob": 1}}}, "jigsaw.config.las has no option 'knob'"),
        ("jigsaw", {"config": {"load_threshold": 9}}, "load_threshold must be in"),
        ("sjf", {}, "unknown policy 'sjf'"),
    ],
)
def test_bad_options_name_what_to_fix(policy: str, raw: dict, message: str) -> None:
    with pytest.raises(InvalidSpecError, match=message.replace("(", r"\(")):
        policy_options(policy, raw)


def test_user_options_change_only_what_they_name_of_the_semantics_config() -> None:
    """Under Pollux's semantics jigsaw's config carries Tiresias' queues and no protection;
    ``{"config": {"pack_gain": 0.1, "las": {"promote_knob": 2}}}`` keeps both."""
    base = POLLUX.policy_options["jigsaw"]
    merged = merged_options(base, {"config": {"pack_gain": 0.1, "las": {"promote_knob": 2}}})
    config = policy_options("jigsaw", merged)["config"]
    assert config.pack_gain == 0.1 and config.min_run_s == 0.0
    assert config.las.thresholds == TIRESIAS.thresholds and config.las.promote_knob == 2
    assert merged_options(base, {"spb": False}) == {**base, "spb": False}
    replaced = merged_options(base, {"config": JigsawConfig()})  # an object replaces it whole
    assert replaced["config"] == JigsawConfig()
