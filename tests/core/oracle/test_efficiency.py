from __future__ import annotations

import json
from pathlib import Path

import pytest

from jigsaw.efficiency.table import (
    CONSERVATIVE_DEFAULT,
    FULL_BACKPROP,
    MEASURED,
    MEASURED_SHAPE,
    EfficiencyTable,
)
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import SPBPlan, full_backprop, staircase


def _write(tmp_path: Path, measurements: list[dict[str, object]]) -> Path:
    path = tmp_path / "efficiency.json"
    path.write_text(json.dumps({"provenance": {}, "measurements": measurements}))
    return path


def _entry(model: str, depths: list[int], mean: float, std: float) -> dict[str, object]:
    return {
        "model": model,
        "dataset": "d",
        "plan": "x",
        "num_workers": len(depths),
        "num_blocks": 4,
        "depths": depths,
        "mean_depth_fraction": 0.0,
        "eta_mean": mean,
        "eta_std": std,
        "final_metric_full": 0.9,
        "final_metric_spb": 0.89,
        "metric": "acc",
        "iters_to_target_full": 100,
        "iters_to_target_spb": 110,
    }


def test_absent_file_gives_conservative_default(tmp_path: Path) -> None:
    table = EfficiencyTable.load(tmp_path / "missing.json")
    estimate = table.lookup("resnet18_32", staircase(4, 4))
    assert estimate.source == CONSERVATIVE_DEFAULT
    assert estimate.eta == pytest.approx(1 - 6 / 16)
    assert table.lookup("mlp", full_backprop(3, 4)).source == FULL_BACKPROP


def test_exact_then_shape_lower_bound(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        [
            _entry("resnet18_32", [0, 1, 2, 3], 0.95, 0.02),
            _entry("mlp", [0, 3, 3, 3], 0.90, 0.05),
        ],
    )
    table = EfficiencyTable.load(path)
    exact = table.lookup("cifar10", staircase(4, 4))  # alias of resnet18_32
    assert (exact.source, exact.eta) == (MEASURED, 0.95)
    # gpt_small staircase: shape 6/16 = 0.375 -> bound of the resnet measurement, 0.93.
    shape = table.lookup("gpt_small", staircase(4, 4))
    assert shape.source == MEASURED_SHAPE and shape.eta == pytest.approx(0.93)
    # Between (0, 1.0) and (0.375, 0.93): linear.
    shallow = table.lookup("gpt_small", SPBPlan((0, 0, 0, 3), 4))
    assert shallow.eta == pytest.approx(1.0 - 0.07 * (3 / 16) / 0.375)
    # Between the two measured shapes (0.375 -> 0.93, 0.5625 -> 0.85): linear.
    middle = table.lookup("gpt_small", SPBPlan((0, 2, 3, 3), 4))
    assert middle.eta == pytest.approx(0.93 - 0.08 * (0.5 - 0.375) / 0.1875)
    # Deeper than any measurement: never above the last bound nor the default.
    deep = table.lookup("gpt_small", SPBPlan((0, 3, 3, 3, 3, 3, 3, 3), 4))
    assert deep.eta == pytest.approx(min(0.85, 1 - 21 / 32))


def test_malformed_file_names_the_entry(tmp_path: Path) -> None:
    bad = _entry("mlp", [0, 9], 0.9, 0.0)
    with pytest.raises(InvalidSpecError, match=r"measurements\[0\]"):
        EfficiencyTable.load(_write(tmp_path, [bad]))
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(InvalidSpecError, match="not valid JSON"):
        EfficiencyTable.load(tmp_path / "broken.json")
