"""One call from a trace file to a replay summary: what the CLI and the benches use."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jigsaw.policies  # noqa: F401  (registers every policy)
from jigsaw.cluster import Cluster
from jigsaw.efficiency import EfficiencyTable
from jigsaw.errors import InvalidSpecError
from jigsaw.hardware import preset
from jigsaw.oracle import Oracle
from jigsaw.policies.base import Policy
from jigsaw.policies.builder import build_policy
from jigsaw.simulator.rates import GavelRate, OracleRate, OverheadModel, ReferenceRate
from jigsaw.simulator.replay import ProgressHook, Replay, ReplayOptions, ReplayResult
from jigsaw.simulator.workload import Arrival, arrivals_from_trace, read_workload
from jigsaw.traces import GavelThroughputs, TraceJob


@dataclass(frozen=True, slots=True)
class SimulationSetup:
    gpus: int = 64
    gpus_per_node: int = 8
    hardware: str = "v100"
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


def make_oracle(setup: SimulationSetup, efficiency: EfficiencyTable | None = None) -> Oracle:
    hardware = preset(setup.hardware)
    return Oracle(hardware, efficiency=efficiency)


def make_policy(name: str, oracle: Oracle, **options: Any) -> Policy:
    """The registered policy ``name`` built as the service builds it
    (:func:`jigsaw.policies.builder.build_policy`), with no quotas."""
    return build_policy(name, oracle, options)


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
        trace, oracle=oracle, gpus_per_node=setup.gpus_per_node, seed=setup.seed, limit=limit,
        start=start, end=end,
    )


def make_rates(
    jobs: list[TraceJob], setup: SimulationSetup, oracle: Oracle
) -> tuple[ReferenceRate, list[Arrival]]:
    """The rate model (oracle, or Gavel's table when ``throughputs`` is given) and the jobs."""
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
    return GavelRate(table, worker_type, job_types, oracle_rate), arrivals


def replay(
    arrivals: list[Arrival],
    policy_name: str,
    rates: ReferenceRate,
    oracle: Oracle,
    setup: SimulationSetup,
    *,
    gavel: bool = False,
    progress: ProgressHook | None = None,
) -> ReplayResult:
    hardware = oracle.hardware
    cluster = Cluster.uniform(
        setup.gpus, setup.gpus_per_node, gpu_memory_bytes=hardware.memory_bytes,
        gpu_type=hardware.name,
    )
    policy = make_policy(policy_name, oracle, **setup.policy_options.get(policy_name, {}))
    in_rounds = setup.admit_in_rounds if setup.admit_in_rounds is not None else gavel
    options = ReplayOptions(
        round_s=setup.round_s, overheads=setup.overheads, admit_in_rounds=in_rounds,
        keep_log=setup.keep_log, skip_quiet_rounds=setup.skip_quiet_rounds,
    )
    result = Replay(arrivals, policy, rates, cluster, options).run(progress)
    result.summary.update(describe_sources(oracle, arrivals))
    result.summary.update(
        {"gpus": setup.gpus, "gpus_per_node": setup.gpus_per_node, "round_s": setup.round_s,
         "hardware": hardware.name, "seed": setup.seed}
    )
    return result


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
    eta_source = (
        f"{table.origin} ({len(table.measurements)} measurements)"
        if table.measurements
        else f"{table.origin}: conservative default eta = 1 - mean(d)/K"
    )
    return {"eta_source": eta_source, "profile_source": profile_sources}
