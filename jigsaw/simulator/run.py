"""One call from a trace file to a replay summary: what the CLI and the benches use."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jigsaw.policies  # noqa: F401  (registers every policy)
from jigsaw.efficiency.table import EfficiencyTable
from jigsaw.goodput.source import GoodputSource
from jigsaw.model.cluster import Cluster
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.hardware import DEFAULT_GPU_TYPE, preset
from jigsaw.model.plan import SPBPlan
from jigsaw.oracle import Oracle, SharingSettings
from jigsaw.policies.base import Policy
from jigsaw.policies.builder import build_policy
from jigsaw.policies.options import merged_options
from jigsaw.simulator.curve_rates import CurveEtaRate, philly_app, with_curve_eta
from jigsaw.simulator.eta_curves import APPS, RATIOS_FILE, CurveEta
from jigsaw.simulator.pollux_agents import PolluxAgents
from jigsaw.simulator.pollux_rate import PolluxRate
from jigsaw.simulator.rates import (
    GavelRate,
    OracleRate,
    OverheadModel,
    ReferenceRate,
    UnitEfficiency,
)
from jigsaw.simulator.replay import ProgressHook, Replay, ReplayOptions
from jigsaw.simulator.replay_result import ReplayResult
from jigsaw.simulator.semantics import JIGSAW, Semantics, trace_format
from jigsaw.simulator.workload import Arrival, arrivals_from_trace, read_workload
from jigsaw.traces import GavelThroughputs, TraceJob
from jigsaw.traces.pollux_apps import find_apps_dir, load_pollux_app


@dataclass(frozen=True, slots=True)
class SimulationSetup:
    gpus: int = 64
    gpus_per_node: int = 8
    hardware: str = DEFAULT_GPU_TYPE
    seed: int = 0
    round_s: float = 60.0
    overheads: OverheadModel = field(default_factory=OverheadModel)
    throughputs: Path | None = None
    worker_type: str | None = None
    admit_in_rounds: bool | None = None
    """None: in rounds for Gavel traces (Gavel's semantics), on events otherwise."""
    keep_log: bool = False
    skip_quiet_rounds: bool = True
    """Jump over rounds a policy says cannot decide anything new (same decisions, faster)."""
    policy_options: dict[str, Any] = field(default_factory=dict)
    eta: str = "table"
    """``table``: eta from the oracle's efficiency table (the default); ``curve``: from each job's
    Pollux application curve at its progress (:mod:`jigsaw.simulator.curve_rates`; Philly jobs
    get an application by :func:`~jigsaw.simulator.curve_rates.philly_app`); ``one``: every
    plan priced and run at eta = 1 (an ablation: what SPB would give if it cost nothing)."""
    curves_dir: Path | None = None
    """Pollux's ``apps/`` directory for ``eta="curve"`` (found beside a Pollux workload)."""
    sharing: SharingSettings = field(default_factory=SharingSettings)
    """How the hardware shares a GPU and the interference penalty (:mod:`jigsaw.oracle.colocation`):
    the policy and the replay price co-location with it alike."""
    knowledge: str = "reports"
    """What the policies know of each job: ``reports`` (the default): what its agent has
    measured where the trace gives measurements (Pollux's workloads), handed to every policy
    that uses a goodput source; ``oracle``: nothing measured, to any policy (each prices
    jobs with the oracle alone; an ablation)."""


ETA_SOURCES = ("table", "curve", "one")
KNOWLEDGE = ("reports", "oracle")


def make_oracle(setup: SimulationSetup, efficiency: EfficiencyTable | None = None) -> Oracle:
    hardware = preset(setup.hardware)
    if efficiency is None and setup.eta == "one":
        efficiency = UnitEfficiency()
    return Oracle(hardware, efficiency=efficiency, sharing=setup.sharing)


def make_policy(
    name: str, oracle: Oracle, goodput: GoodputSource | None = None, **options: Any
) -> Policy:
    """The registered policy ``name`` built as the service builds it
    (:func:`jigsaw.policies.builder.build_policy`), with no quotas; ``goodput`` goes to it
    if it uses one."""
    return build_policy(name, oracle, options, goodput=goodput)


def load_jobs(
    trace: Path,
    setup: SimulationSetup,
    oracle: Oracle,
    *,
    limit: int | None = None,
    start: str | None = None,
    end: str | None = None,
) -> list[TraceJob]:
    return read_workload(
        trace,
        oracle=oracle,
        gpus_per_node=setup.gpus_per_node,
        seed=setup.seed,
        limit=limit,
        start=start,
        end=end,
    )


def make_rates(
    jobs: list[TraceJob], setup: SimulationSetup, oracle: Oracle, trace: Path | None = None
) -> tuple[ReferenceRate, list[Arrival]]:
    """The rate model and the jobs: Pollux's measured step times for a Pollux workload
    (``trace``), Gavel's table when ``throughputs`` is given, the oracle otherwise."""
    if setup.eta not in ETA_SOURCES:
        raise InvalidSpecError(
            f"eta must be one of {', '.join(ETA_SOURCES)}, got {setup.eta!r}", field="eta"
        )
    if setup.knowledge not in KNOWLEDGE:
        raise InvalidSpecError(
            f"knowledge must be one of {', '.join(KNOWLEDGE)}, got {setup.knowledge!r}",
            field="knowledge",
        )
    rates, arrivals = _make_rates(jobs, setup, oracle, trace)
    if setup.eta == "curve":
        rates = curve_eta_rates(rates, arrivals, setup, oracle, trace)
    return rates, arrivals


def curve_eta_rates(
    rates: ReferenceRate,
    arrivals: list[Arrival],
    setup: SimulationSetup,
    oracle: Oracle,
    trace: Path | None,
) -> ReferenceRate:
    """``rates`` with eta from each job's application curve: a Pollux job's own application,
    a Philly job's by :func:`philly_app`."""
    apps_dir = setup.curves_dir or (find_apps_dir(trace) if trace is not None else None)
    if apps_dir is None:
        raise InvalidSpecError(
            "eta='curve' needs Pollux's apps/ directory (curves_dir)", field="curves_dir"
        )
    app_of = {
        a.job_id: a.trace.model if a.trace.model in APPS else philly_app(a.trace, setup.seed)
        for a in arrivals
    }
    curves = CurveEta.load(apps_dir, sorted(set(app_of.values())))
    if isinstance(rates, PolluxRate):
        # The curve's eta replaces the one the measured rate already charges.
        return with_curve_eta(rates, curves, app_of, rates.eta)
    return with_curve_eta(
        rates,
        curves,
        app_of,
        lambda job, plan: oracle.eta(job.spec.model, plan) if isinstance(plan, SPBPlan) else 1.0,
    )


def _make_rates(
    jobs: list[TraceJob], setup: SimulationSetup, oracle: Oracle, trace: Path | None = None
) -> tuple[ReferenceRate, list[Arrival]]:
    if trace is not None and trace_format(trace) == "pollux":
        return pollux_rates(jobs, trace, setup, oracle)
    oracle_rate = OracleRate(oracle, setup.gpus_per_node)
    if setup.throughputs is None:
        arrivals = arrivals_from_trace(
            jobs,
            lambda j: oracle.full_rate(j.model, j.batch_size, j.num_workers, setup.gpus_per_node),
        )
        return oracle_rate, arrivals
    table = GavelThroughputs.load(setup.throughputs)
    worker_type = setup.worker_type or "v100"
    if worker_type not in table.worker_types():
        raise InvalidSpecError(
            f"worker type {worker_type!r} is not in {setup.throughputs}; "
            f"choose one of: {', '.join(table.worker_types())}",
            field="worker_type",
        )
    missing = [j for j in jobs if j.original_model is None]
    if missing:
        raise InvalidSpecError(
            f"{missing[0].source}: --throughputs needs a Gavel trace (job types)",
            field="throughputs",
        )
    rate_of = {
        j.id: table.steps_per_second(worker_type, j.original_model or "", j.num_workers)
        for j in jobs
    }
    arrivals = arrivals_from_trace(jobs, lambda j: rate_of[j.id])
    job_types = {a.job_id: a.trace.original_model or "" for a in arrivals}
    return GavelRate(table, worker_type, job_types, oracle_rate, setup.round_s), arrivals


def pollux_rates(
    jobs: list[TraceJob], trace: Path, setup: SimulationSetup, oracle: Oracle | None = None
) -> tuple[ReferenceRate, list[Arrival]]:
    """Pollux's semantics: its measured step times; the work is already in the jobs. Gangs
    sharing a GPU are re-timed by ``oracle``'s co-location model (without one: Pollux's
    simulator's rule, each gang divided by 1 + the others' load)."""
    apps_dir = find_apps_dir(trace)
    if apps_dir is None:
        raise InvalidSpecError(f"{trace}: no apps/ directory beside the workload", field="trace")
    apps = {name: load_pollux_app(apps_dir, name) for name in sorted({j.model for j in jobs})}
    rate = PolluxRate(apps, setup.gpus_per_node, oracle)
    return rate, arrivals_from_trace(jobs, lambda _job: 1.0)


def replay(
    arrivals: list[Arrival],
    policy_name: str,
    rates: ReferenceRate,
    oracle: Oracle,
    setup: SimulationSetup,
    *,
    gavel: bool = False,
    semantics: Semantics | None = None,
    progress: ProgressHook | None = None,
) -> ReplayResult:
    """``semantics`` (see :mod:`jigsaw.simulator.semantics`) sets the overheads, the rounds
    and the policies' options of the peer simulator; ``setup`` still overrides options and
    ``admit_in_rounds``. Without it, ``gavel`` keeps the older meaning: rounds only."""
    hardware = oracle.hardware
    cluster = Cluster.uniform(
        setup.gpus,
        setup.gpus_per_node,
        gpu_memory_bytes=hardware.memory_bytes,
        gpu_type=hardware.name,
    )
    chosen = semantics if semantics is not None else JIGSAW
    options_for = merged_options(
        chosen.policy_options.get(policy_name, {}), setup.policy_options.get(policy_name, {})
    )
    knowledge = job_reports_for(rates, setup.knowledge)
    policy = make_policy(policy_name, oracle, knowledge, **options_for)
    in_rounds = setup.admit_in_rounds
    if in_rounds is None:
        in_rounds = chosen.admit_in_rounds or gavel
    overheads = setup.overheads if chosen is JIGSAW else chosen.overheads
    options = ReplayOptions(
        round_s=setup.round_s,
        overheads=overheads,
        admit_in_rounds=in_rounds,
        keep_log=setup.keep_log,
        skip_quiet_rounds=setup.skip_quiet_rounds,
        rounds_end_when_idle=chosen.rounds_end_when_idle,
        rounds_on_grid_only=chosen.rounds_on_grid_only,
        allocation_reset_s=chosen.allocation_reset_s,
    )
    result = Replay(arrivals, policy, rates, cluster, options).run(progress)
    result.summary.update(describe_sources(oracle, arrivals))
    if isinstance(rates, CurveEtaRate):
        result.summary["eta_source"] = curve_eta_source(rates)
    result.summary.update(
        {
            "gpus": setup.gpus,
            "gpus_per_node": setup.gpus_per_node,
            "round_s": setup.round_s,
            "hardware": hardware.name,
            "seed": setup.seed,
            "semantics": chosen.name,
            "knowledge": setup.knowledge,
            "sharing": oracle.colocation.settings.mode,
            "interference": oracle.colocation.settings.interference,
        }
    )
    return result


def job_reports_for(rates: ReferenceRate, knowledge: str = "reports") -> GoodputSource | None:
    """What every policy that uses a goodput source is given (the builder hands it to each
    one that declares ``goodput``): the rate model's simulated job agents, fresh for each
    replay, where the trace has measurements (Pollux's applications,
    :class:`~jigsaw.simulator.pollux_agents.PolluxAgents`, also under ``--eta curve``); ``None``
    otherwise and under ``knowledge="oracle"``."""
    measured = rates.inner if isinstance(rates, CurveEtaRate) else rates
    if knowledge == "oracle" or not isinstance(measured, PolluxRate):
        return None
    return PolluxAgents(measured)


def describe_sources(oracle: Oracle, arrivals: list[Arrival]) -> dict[str, Any]:
    """Where eta and the model profiles came from, so no figure hides a default."""
    models = sorted({a.spec.model for a in arrivals})
    profile_sources: dict[str, str] = {}
    for model in models:
        try:
            profile_sources[model] = oracle.source(model)
        except InvalidSpecError:
            profile_sources[model] = "unknown model (opaque)"
    table = oracle.efficiency
    if isinstance(table, UnitEfficiency):
        eta_source = table.origin
    elif table.measurements:
        eta_source = f"{table.origin} ({len(table.measurements)} measurements)"
    else:
        eta_source = f"{table.origin}: conservative default eta = 1 - mean(d)/K"
    return {"eta_source": eta_source, "profile_source": profile_sources}


def curve_eta_source(rates: CurveEtaRate) -> str:
    """What eta a curve-eta replay used, for the summary."""
    apps = sorted(set(rates.app_of.values()))
    return (
        f"curve: Pollux validation curves of {', '.join(apps)} split per block by "
        f"{RATIOS_FILE.name}, harmonic mean over each gang's remaining progress"
    )
