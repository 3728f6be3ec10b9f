"""The docs a user reads first agree with the code and with each other.

- Every figure of the README's "How fast and how good" list appears in docs/BENCHMARKS.md's
  current figures (its "Current figures" and "Cluster-level gain (current)" sections), where
  each has its command and date.
- The cluster-gain chart (``bench/plot_gain.py``) plots the geometric means that page's table
  shows, from the same committed results.
- docs/SCHEDULER.md has a section for every registered policy.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.plot_gain import CURRENT, philly_ratios, pollux_ratios
from jigsaw.policies import policy_names

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BENCHMARKS = (ROOT / "docs" / "BENCHMARKS.md").read_text()
SCHEDULER = (ROOT / "docs" / "SCHEDULER.md").read_text()

FIGURE = re.compile(
    r"(?<![\w.,\u2013])\d[\d,]*(?:\.\d+)?(?:\u2013\d[\d,]*(?:\.\d+)?)?(?:x|%| ms| s)(?!\w)"
)
"""A figure with its unit: ``1.43x``, ``26%``, ``18-25%`` (an en dash), ``23.0 ms``, ``108 s``."""


def between(text: str, start: str, end: str) -> str:
    head = text.index(start)
    return text[head : text.index(end, head)]


README_FIGURES = between(README, "How fast and how good", "## Layout and docs")
CURRENT_SECTION = between(BENCHMARKS, "## Current figures", "# Details")


def appears(figure: str, text: str) -> bool:
    return re.search(rf"(?<![\w.,\u2013]){re.escape(figure)}(?!\w)", text) is not None


def test_the_readme_quotes_figures() -> None:
    """The extraction finds the headline (a regex that matched nothing would pass anything)."""
    figures = FIGURE.findall(README_FIGURES)
    assert {"0.940x", "0.909x", "0.770x", "37.8%", "1.43x", "1.74x", "59.4 ms"} <= set(figures)


@pytest.mark.parametrize("figure", sorted(set(FIGURE.findall(README_FIGURES))))
def test_every_readme_figure_is_a_current_benchmark_figure(figure: str) -> None:
    assert appears(figure, CURRENT_SECTION), (
        f"README quotes {figure}, which docs/BENCHMARKS.md's current figures do not show"
    )


def test_the_superseded_headline_is_gone() -> None:
    assert not appears("2.19x", README_FIGURES)
    assert not appears("0.991x", README_FIGURES)  # the old default's Pollux headline


def test_the_gain_chart_plots_the_tables_figures() -> None:
    pollux = pollux_ratios(CURRENT)
    for load, ratios in pollux.items():
        short = load.rsplit(" ", 1)[1]  # "1x", "2x"
        for policy, ratio in ratios.items():
            row = re.compile(
                rf"\| {short} \| (\*\*)?{policy}(\*\*)? \| (\*\*)?{ratio:.3f}(\*\*)? \|"
            )
            assert row.search(CURRENT_SECTION), (load, policy, f"{ratio:.3f}")
    philly = philly_ratios(CURRENT)
    assert set(philly) == {"philly-low", "philly-mid", "philly-high"}
    assert all(ratios["jigsaw"] < 1.0 for ratios in philly.values())  # "below las" in the text


@pytest.mark.parametrize("policy", policy_names())
def test_every_registered_policy_has_a_section_in_the_scheduler_doc(policy: str) -> None:
    heading = re.compile(rf"^###? {re.escape(policy)}(:| |$)", re.MULTILINE)
    assert heading.search(SCHEDULER), f"docs/SCHEDULER.md has no section for {policy!r}"
