"""The oracle (cost model): per-worker compute, memory and traffic, iteration time, goodput.

``Oracle`` is the entry point; ``calibration`` fits its network/overlap parameters to the
Pollux measurements (``bench/oracle_calibration.py``). See docs/ORACLE.md.
"""

from jigsaw.model.environment import SHARING_MODES
from jigsaw.oracle.colocation import ColocationModel, SharingSettings
from jigsaw.oracle.gang_timing import GangTiming, SharingProfile
from jigsaw.oracle.oracle import Oracle, Prediction
from jigsaw.oracle.timeslicing import timesliced_iteration_times

__all__ = [
    "SHARING_MODES",
    "ColocationModel",
    "GangTiming",
    "Oracle",
    "Prediction",
    "SharingProfile",
    "SharingSettings",
    "timesliced_iteration_times",
]
