from __future__ import annotations

import json
from pathlib import Path

import pytest

from jigsaw.model.errors import TraceFormatError
from jigsaw.model.hardware import load_calibration, preset
from jigsaw.oracle.calibration import fit_app, load_app, predict
from jigsaw.oracle.calibration_eval import (
    fold_of_each_row,
    held_out_errors,
    out_of_fold_predictions,
)

CIFAR = Path(__file__).resolve().parents[2] / "data" / "pollux" / "apps" / "cifar10"


def test_excerpt_loads_both_files() -> None:
    rows = load_app(CIFAR)
    placements = {r.placement for r in rows}
    assert {"1", "4444", "n6r6", "n8r16"} <= placements
    row = next(r for r in rows if r.placement == "1112" or r.placement == "112")
    assert (row.num_nodes, row.num_replicas, row.max_gpus_per_node) == (3, 4, 2)


def test_fit_reproduces_training_rows_and_holds_out_configurations() -> None:
    rows = load_app(CIFAR)
    step, _sync = predict(fit_app(rows), rows)
    errors = held_out_errors(rows, step, _sync)
    assert errors.step_mape < 0.15
    folds = fold_of_each_row(rows, 5, 0)
    by_config: dict[str, set[int]] = {}
    for row, fold in zip(rows, folds, strict=True):
        by_config.setdefault(row.placement, set()).add(fold)
    assert all(len(f) == 1 for f in by_config.values())  # a configuration never straddles
    held_step, held_sync = out_of_fold_predictions(rows, 5, 0)
    held = held_out_errors(rows, held_step, held_sync)
    assert held.step_mape < 0.2 and held.rows == len(rows)


def test_malformed_placement_row(tmp_path: Path) -> None:
    app = tmp_path / "cifar10"
    app.mkdir()
    (app / "placements.csv").write_text(
        "placement,local_bsz,step_time,sync_time\n1,32,0.04,0.0005\n1x,32,0.04,0.001\n"
    )
    (app / "scalability.csv").write_text("num_nodes,num_replicas,local_bsz,step_time,sync_time\n")
    with pytest.raises(TraceFormatError, match="placement") as error:
        load_app(app)
    assert error.value.line == 3


def test_packaged_calibration_feeds_the_t4_preset() -> None:
    calibration = load_calibration()
    if not calibration:
        pytest.skip("jigsaw/data/calibration.json not generated")
    links = calibration["global"]["t4_links"]
    t4 = preset("t4")
    assert t4.inter_node_bandwidth == pytest.approx(links["inter_node_bandwidth"])
    assert 0.2 < t4.compute_efficiency < 1.2
    assert "held_out_mape_pct" in calibration
    json.dumps(calibration)
