"""One path from a trace file to replay results: what ``jigsaw-cli simulate`` and
``bench/sim_gain.py`` both call, so every figure a table shows can be made by a user.

1. :func:`simulation_setup`: the setup, with the round length of the trace's semantics
   (:mod:`jigsaw.simulator.semantics`) when none is given;
2. :func:`check_policy_options`: every policy named, and every option, exists (before any
   replay starts);
3. :func:`prepare_trace`: the oracle, the jobs, the rate model and the arrivals;
4. :meth:`PreparedTrace.replay`: one policy over them, under the trace's semantics.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jigsaw.model.errors import InvalidSpecError
from jigsaw.oracle import Oracle
from jigsaw.policies import policy_names
from jigsaw.policies.options import merged_options, policy_options
from jigsaw.simulator.collector import paused_collector
from jigsaw.simulator.rates import ReferenceRate
from jigsaw.simulator.replay import ProgressHook
from jigsaw.simulator.replay_result import ReplayResult
from jigsaw.simulator.run import SimulationSetup, load_jobs, make_oracle, make_rates, replay
from jigsaw.simulator.semantics import Semantics, semantics_for
from jigsaw.simulator.workload import Arrival


def simulation_setup(
    trace: Path, *, round_s: float | None = None, throughputs: Path | None = None, **fields: Any
) -> SimulationSetup:
    """The setup for ``trace``: ``round_s`` defaults to its semantics' round length."""
    semantics = semantics_for(trace, throughputs=throughputs is not None)
    chosen = round_s if round_s is not None else semantics.round_s
    return SimulationSetup(round_s=chosen, throughputs=throughputs, **fields)


def check_policy_options(
    policies: list[str], options: dict[str, Any], semantics: Semantics
) -> None:
    """Raise :class:`InvalidSpecError` naming the first policy or option that does not exist,
    or a policy that is given options but not run."""
    known = policy_names()
    for name, raw in options.items():
        if name not in known:
            raise InvalidSpecError(
                f"policy options name unknown policy {name!r}; choose from {', '.join(known)}",
                field="policy_options",
            )
        if name not in policies:
            raise InvalidSpecError(
                f"policy options name {name!r}, which is not among the policies run "
                f"({', '.join(policies)})",
                field="policy_options",
            )
        if not isinstance(raw, dict):
            raise InvalidSpecError(
                f"policy options of {name!r} must be a JSON object, got {raw!r}",
                field="policy_options",
            )
        policy_options(name, merged_options(semantics.policy_options.get(name, {}), raw))


@dataclass(frozen=True, slots=True)
class PreparedTrace:
    trace: Path
    setup: SimulationSetup
    semantics: Semantics
    oracle: Oracle
    rates: ReferenceRate
    arrivals: list[Arrival]

    def replay(self, policy: str, progress: ProgressHook | None = None) -> ReplayResult:
        """The trace under ``policy``, with the collector paused
        (:mod:`~jigsaw.simulator.collector`)."""
        with paused_collector():
            return replay(
                self.arrivals,
                policy,
                self.rates,
                self.oracle,
                self.setup,
                semantics=self.semantics,
                progress=progress,
            )


def prepare_trace(
    trace: Path,
    setup: SimulationSetup,
    *,
    limit: int | None = None,
    start: str | None = None,
    end: str | None = None,
) -> PreparedTrace:
    semantics = semantics_for(trace, throughputs=setup.throughputs is not None)
    oracle = make_oracle(setup)
    with paused_collector():  # the trace's jobs are built to last: no collection frees one
        jobs = load_jobs(trace, setup, oracle, limit=limit, start=start, end=end)
        if not jobs:
            raise InvalidSpecError(
                f"{trace}: no jobs to replay (check --start/--end/--limit)", field="trace"
            )
        rates, arrivals = make_rates(jobs, setup, oracle, trace)
    return PreparedTrace(trace, setup, semantics, oracle, rates, arrivals)


def simulate_trace(
    trace: Path,
    policies: list[str],
    setup: SimulationSetup,
    *,
    limit: int | None = None,
    start: str | None = None,
    end: str | None = None,
) -> list[ReplayResult]:
    """Every policy of ``policies`` replayed over ``trace`` (``jigsaw-cli simulate``'s work,
    without its progress bar and printing)."""
    semantics = semantics_for(trace, throughputs=setup.throughputs is not None)
    check_policy_options(policies, setup.policy_options, semantics)
    prepared = prepare_trace(trace, setup, limit=limit, start=start, end=end)
    return [prepared.replay(name) for name in policies]
