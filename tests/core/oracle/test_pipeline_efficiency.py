"""η of a PipeDream-2BW pipeline (its one-step weight delay), and ``parallelism: auto``
ranking plan types by goodput (samples/s x η) instead of samples/s."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from jigsaw.efficiency.pipeline import (
    DEFAULT_DELAY_CURVATURE,
    DELAY_CURVATURE,
    delay_curvature,
    effective_step,
    fit_curvature,
    model_pipeline_eta,
    pipeline_eta,
    spectral_radius,
)
from jigsaw.model.domain import JobSpec
from jigsaw.model.hardware import preset, with_overrides
from jigsaw.model.parallelism import HybridPlan, PipelinePlan
from jigsaw.oracle.plan_choice import choose_plan, plan_efficiency
from jigsaw.planning.planner import Planner
from tests.core.oracle.toy_parallel_profile import HW, toy

RESULTS = Path(__file__).parents[3] / "bench" / "results" / "pipeline_efficiency.json"


# --- the model ------------------------------------------------------------------------------


def test_without_delay_or_momentum_the_contraction_is_one_minus_the_step() -> None:
    assert spectral_radius(0.1, 0.0, 2.0, delay=0) == pytest.approx(0.8)
    assert spectral_radius(0.5, 0.0, 3.0, delay=0) == pytest.approx(0.5)  # overshoots: |1 - a|
    # Heavy ball in its oscillating regime contracts by sqrt(momentum), whatever the step.
    assert spectral_radius(0.05, 0.9, 1.0, delay=0) == pytest.approx(math.sqrt(0.9))


def test_the_delayed_rule_loses_stability_where_the_effective_step_reaches_one() -> None:
    for momentum in (0.0, 0.5, 0.9):
        edge = 1.0 - momentum  # lr at the edge for h = 1
        assert effective_step(edge, momentum, 1.0) == pytest.approx(1.0)
        assert spectral_radius(edge * 0.99, momentum, 1.0, delay=1) < 1.0
        assert spectral_radius(edge * 1.01, momentum, 1.0, delay=1) > 1.0
        # Exact SGD is still stable there: its edge is lr h = 2 (1 + momentum).
        assert spectral_radius(edge * 1.01, momentum, 1.0, delay=0) < 1.0
        # η is one half at the edge, and depends on lr and momentum through x alone.
        assert pipeline_eta(edge, momentum, 1.0) == pytest.approx(0.5)


def test_eta_is_one_for_small_steps_and_falls_with_lr_and_with_momentum() -> None:
    h = DEFAULT_DELAY_CURVATURE
    assert pipeline_eta(1e-5, 0.9, h) == pytest.approx(1.0, abs=1e-6)
    lrs = (0.001, 0.01, 0.02, 0.05)
    for momentum in (0.0, 0.5, 0.9):
        etas = [pipeline_eta(lr, momentum, h) for lr in lrs]
        assert etas == sorted(etas, reverse=True), (momentum, etas)
    for lr in lrs:
        etas = [pipeline_eta(lr, momentum, h) for momentum in (0.0, 0.5, 0.9)]
        assert etas == sorted(etas, reverse=True), (lr, etas)
    # The job default (lr 0.05, the engines' momentum 0.9) is past the delayed edge.
    assert model_pipeline_eta("mlp", 0.05) < 0.3
    assert model_pipeline_eta("mlp", 0.01, 0.0) > 0.99


def test_a_model_without_a_measurement_gets_the_most_sensitive_curvature() -> None:
    assert delay_curvature("mlp") == DELAY_CURVATURE["mlp"]
    assert delay_curvature("gpt_small") == DEFAULT_DELAY_CURVATURE == max(DELAY_CURVATURE.values())
    assert model_pipeline_eta("gpt_small", 0.02) <= model_pipeline_eta("mlp", 0.02)


def test_fit_curvature_recovers_the_curvature_that_made_the_etas() -> None:
    grid = [(lr, mu) for lr in (0.01, 0.02, 0.05) for mu in (0.0, 0.5, 0.9)]
    made = [(lr, mu, pipeline_eta(lr, mu, 2.5)) for lr, mu in grid]
    assert fit_curvature(made) == pytest.approx(2.5, rel=1e-3)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="momentum"):
        pipeline_eta(0.05, 1.0, 1.0)
    with pytest.raises(ValueError, match="lr"):
        pipeline_eta(0.0, 0.9, 1.0)
    with pytest.raises(ValueError, match="curvature"):
        pipeline_eta(0.05, 0.9, 0.0)
    with pytest.raises(ValueError, match="delay"):
        spectral_radius(0.05, 0.9, 1.0, delay=2)
    with pytest.raises(ValueError, match="at least one"):
        fit_curvature([])


def test_the_committed_curvatures_are_the_fit_of_the_committed_measurements() -> None:
    """DELAY_CURVATURE comes from bench/pipeline_efficiency.py --fit, and refitting the rows
    it names gives it back."""
    fit = json.loads(RESULTS.read_text())["fit"]
    assert fit["per_model"]["curvature"] == pytest.approx(dict(DELAY_CURVATURE), abs=1e-3)
    for model, h in DELAY_CURVATURE.items():
        rows = [r for r in fit["per_model"]["train"]["rows"] if r["model"] == model]
        refit = fit_curvature([(r["lr"], r["momentum"], r["eta_measured"]) for r in rows])
        assert refit == pytest.approx(h, abs=1e-3)


# --- η per plan type ------------------------------------------------------------------------


def test_only_a_2bw_pipeline_pays_for_a_delay() -> None:
    two_bw = PipelinePlan.for_workers(4, 4, 1, 4)
    gpipe = PipelinePlan.for_workers(4, 4, 1, 4, schedule="gpipe")
    hybrid = HybridPlan.suffix(4, 4, 4, "column")
    assert plan_efficiency(two_bw, "mlp", 0.05, 0.9) == model_pipeline_eta("mlp", 0.05) < 1.0
    for plan in (gpipe, hybrid, None):
        assert plan_efficiency(plan, "mlp", 0.05, 0.9) == 1.0
    assert plan_efficiency(two_bw, "mlp", None, 0.9) == 1.0  # lr unknown: samples/s alone


# --- auto ranks by goodput ------------------------------------------------------------------


def choose_at(lr: float | None, momentum: float = 0.9):
    profile = toy()
    return choose_plan(
        profile.blocks, profile, HW, 4, 8, 10**12, "auto", 0.15, lr=lr, momentum=momentum
    )


def test_a_pipeline_faster_on_samples_per_s_loses_on_goodput_at_the_job_default() -> None:
    # On samples/s alone (lr unknown) the 4-stage 2BW pipeline wins, ~1.9x data parallelism.
    blind = choose_at(None)
    data = blind.alternatives[0]
    assert blind.chosen.kind == "pipeline"
    assert blind.chosen.samples_per_s > 1.5 * data.samples_per_s
    # At lr 0.05 and momentum 0.9 its η makes it worth less than data parallelism.
    default = choose_at(0.05)
    pipeline = max(
        (a for a in default.alternatives if a.kind == "pipeline"), key=lambda a: a.samples_per_s
    )
    assert pipeline.samples_per_s > 1.15 * data.samples_per_s
    assert pipeline.goodput < 1.15 * data.goodput
    assert default.chosen.kind == "data"
    assert f"η {pipeline.efficiency:.2f}" in default.reason
    assert "samples/s" in default.reason and "goodput" in default.reason
    assert "lr 0.05, momentum 0.9" in default.reason


def test_where_its_eta_is_near_one_the_pipeline_still_wins() -> None:
    for lr, momentum in ((0.001, 0.9), (0.01, 0.0)):
        choice = choose_at(lr, momentum)
        assert choice.chosen.kind == "pipeline", (lr, momentum, choice.reason)
        assert choice.chosen.efficiency > 0.9
        assert "goodput" in choice.reason and "η" in choice.reason


def test_the_planner_ranks_by_the_jobs_learning_rate() -> None:
    """digits_wide_mlp on 4 workers over a 1 GB/s network: the 4-stage pipeline is the
    fastest on samples/s; at lr 0.05 (momentum 0.9) its η hands the job to the hybrid, at
    lr 0.001 it keeps the pipeline. The planner caches per learning rate."""
    network = with_overrides(preset("v100"), intra_node_bandwidth=1e9, inter_node_bandwidth=1e9)
    planner = Planner(network)

    def chosen(lr: float) -> str:
        spec = JobSpec(name="w", model="digits_wide_mlp", workers=4, iterations=1, learning_rate=lr)
        choice = planner.plan_choice(spec)
        assert choice is not None
        fastest = max(choice.alternatives, key=lambda a: a.samples_per_s)
        assert fastest.kind == "pipeline"
        return choice.chosen.kind

    assert chosen(0.05) == "hybrid"
    assert chosen(0.001) == "pipeline"
    assert chosen(0.05) == "hybrid"
