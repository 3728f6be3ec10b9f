"""The trace-driven simulator: the real scheduling cycle in virtual time (docs/SCHEDULER.md).

``replay`` runs one policy over a list of arrivals; ``run`` wires a trace file, the oracle
and a policy together (what ``jigsaw-cli simulate`` and the benches call).
"""

from jigsaw.simulator.rates import GavelRate, OracleRate, OverheadModel, UnitEfficiency
from jigsaw.simulator.replay import Replay, ReplayOptions
from jigsaw.simulator.replay_result import ReplayResult
from jigsaw.simulator.run import SimulationSetup, load_jobs, make_oracle, make_rates, replay
from jigsaw.simulator.workload import Arrival, arrivals_from_trace

__all__ = [
    "Arrival",
    "GavelRate",
    "OracleRate",
    "OverheadModel",
    "Replay",
    "ReplayOptions",
    "ReplayResult",
    "SimulationSetup",
    "UnitEfficiency",
    "arrivals_from_trace",
    "load_jobs",
    "make_oracle",
    "make_rates",
    "replay",
]
