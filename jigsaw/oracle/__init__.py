"""The oracle (cost model): per-worker compute, memory and traffic, iteration time, goodput.

``Oracle`` is the entry point; ``calibration`` fits its network/overlap parameters to the
Pollux measurements (``bench/oracle_calibration.py``). See docs/ORACLE.md.
"""

from jigsaw.oracle.oracle import Oracle, Prediction
from jigsaw.oracle.timeslicing import GangTiming, timesliced_iteration_times

__all__ = ["GangTiming", "Oracle", "Prediction", "timesliced_iteration_times"]
