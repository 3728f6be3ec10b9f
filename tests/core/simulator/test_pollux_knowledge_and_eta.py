"""Under Pollux's semantics the instrument is symmetric: an SPB plan pays its eta under every
``--eta`` mode, and every policy that uses a goodput source gets the same one (or, under
``--knowledge oracle``, none)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from jigsaw.model.domain import Job
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import full_backprop, staircase
from jigsaw.policies.base import SUPPLIED, registration
from jigsaw.policies.builder import build_policy
from jigsaw.simulator import load_jobs, make_oracle, make_rates
from jigsaw.simulator.curve_rates import CurveEtaRate
from jigsaw.simulator.pollux_agents import PolluxAgents
from jigsaw.simulator.pollux_rate import PolluxRate
from jigsaw.simulator.run import job_reports_for, replay
from tests.core.elastic_support import APPS, two_elastic_pollux_jobs

PLACEMENT = ((0, 0), (0, 1), (0, 2), (0, 3))


def _rates(tmp_path: Path, eta: str) -> tuple[PolluxRate | CurveEtaRate, Job, float]:
    trace, setup, oracle = two_elastic_pollux_jobs(tmp_path)
    setup = replace(setup, eta=eta, curves_dir=APPS)
    rates, arrivals = make_rates(load_jobs(trace, setup, oracle), setup, oracle, trace)
    assert isinstance(rates, PolluxRate | CurveEtaRate)
    arrival = next(a for a in arrivals if a.spec.workers == 4)
    job = Job(id=arrival.job_id, spec=arrival.spec, submitted_at=arrival.at)
    table_eta = oracle.eta("cifar10", staircase(4, oracle.num_blocks("cifar10")))
    return rates, job, table_eta


@pytest.mark.parametrize("eta", ["table", "curve"])
def test_an_spb_plan_progresses_slower_than_full_backprop_by_its_eta(
    tmp_path: Path, eta: str
) -> None:
    rates, job, table_eta = _rates(tmp_path, eta)
    blocks = 4
    full = rates.rate(job, PLACEMENT, full_backprop(4, blocks), {})
    spb = rates.rate(job, PLACEMENT, staircase(4, blocks), {})
    if isinstance(rates, CurveEtaRate):
        expected = rates.curves.mean_eta("cifar10", staircase(4, blocks), job.spec.batch_size, 0.0)
        assert expected != pytest.approx(table_eta)  # the curve's, not the table's twice
    else:
        expected = table_eta
    assert expected < 0.95
    assert spb / full == pytest.approx(expected, rel=1e-9)


def test_eta_one_charges_nothing(tmp_path: Path) -> None:
    trace, setup, _ = two_elastic_pollux_jobs(tmp_path)
    setup = replace(setup, eta="one")
    oracle = make_oracle(setup)
    rates, arrivals = make_rates(load_jobs(trace, setup, oracle), setup, oracle, trace)
    job = Job(id=arrivals[1].job_id, spec=arrivals[1].spec, submitted_at=arrivals[1].at)
    spb = rates.rate(job, PLACEMENT, staircase(4, 4), {})
    assert spb == pytest.approx(rates.rate(job, PLACEMENT, full_backprop(4, 4), {}))


def test_goodput_is_a_supplied_dependency_and_pollux_declares_it() -> None:
    assert "goodput" in SUPPLIED
    assert "goodput" in registration("pollux").uses


@pytest.mark.parametrize("eta", ["table", "curve"])
def test_the_replay_hands_measured_reports_under_every_eta_mode(tmp_path: Path, eta: str) -> None:
    """Under ``--eta curve`` the rate model wraps Pollux's; the reports still go out (before,
    pollux never resized under ``--eta curve``)."""
    rates, _, _ = _rates(tmp_path, eta)
    assert isinstance(job_reports_for(rates), PolluxAgents)
    assert job_reports_for(rates, "oracle") is None


def test_the_builder_hands_the_same_source_to_a_policy_that_uses_it(tmp_path: Path) -> None:
    trace, setup, oracle = two_elastic_pollux_jobs(tmp_path)
    rates, _ = make_rates(load_jobs(trace, setup, oracle), setup, oracle, trace)
    source = job_reports_for(rates)
    policy = build_policy("pollux", oracle, goodput=source)
    assert policy.resizes_running_jobs  # it has reports to size jobs from
    assert not build_policy("pollux", oracle).resizes_running_jobs
    with pytest.raises(InvalidSpecError, match="goodput"):
        build_policy("pollux", oracle, {"goodput": 1})  # not a JSON option


def test_oracle_only_knowledge_leaves_pollux_without_reports(tmp_path: Path) -> None:
    """The same two elastic jobs: with reports pollux resizes them; with oracle-only
    knowledge it has nothing to size from and keeps every job at the size it asked for."""
    trace, setup, oracle = two_elastic_pollux_jobs(tmp_path)

    def resizes(knowledge: str) -> list[str]:
        chosen = replace(setup, knowledge=knowledge)
        rates, arrivals = make_rates(load_jobs(trace, chosen, oracle), chosen, oracle, trace)
        result = replay(arrivals, "pollux", rates, oracle, chosen)
        assert result.summary["knowledge"] == knowledge
        assert result.log.lines is not None
        return [line for line in result.log.lines if " resize " in line]

    assert resizes("reports")
    assert resizes("oracle") == []
    with pytest.raises(InvalidSpecError, match="knowledge"):
        bad = replace(setup, knowledge="psychic")
        make_rates(load_jobs(trace, bad, oracle), bad, oracle, trace)


def test_the_cli_switches_knowledge_and_refuses_an_unknown_one() -> None:
    root = Path(__file__).resolve().parents[3]
    trace = root / "tests" / "data" / "pollux_workload_excerpt.csv"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cli", "simulate", str(trace), "--policy", "pollux", *args],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
        )

    base = ("--gpus", "64", "--gpus-per-node", "4", "-o", "json")
    done = cli(*base, "--knowledge", "oracle")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["knowledge"], result["completed"]) == ("oracle", 20)
    wrong = cli(*base, "--knowledge", "psychic")
    assert wrong.returncode == 2 and "--knowledge must be one of reports, oracle" in wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1


def test_curve_eta_keeps_an_elastic_gangs_progress_curve(tmp_path: Path) -> None:
    """An elastic gang off its initial size progresses epoch by epoch under ``--eta curve``
    as under ``--eta table`` (before, the wrapper dropped the curve: a straight line)."""
    rates, job, _ = _rates(tmp_path, "curve")
    assert isinstance(rates, CurveEtaRate) and isinstance(rates.inner, PolluxRate)
    grown = ((0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3))
    plan = full_backprop(8, 4)
    inner = rates.inner.progress_curve(job, grown, plan)
    outer = rates.progress_curve(job, grown, plan)
    assert inner is not None and outer is not None
    assert [outer(s) for s in (0.1, 0.5, 0.9)] == [inner(s) for s in (0.1, 0.5, 0.9)]
