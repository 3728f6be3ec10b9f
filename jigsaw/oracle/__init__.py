"""The oracle (cost model): per-worker compute, memory and traffic, iteration time, goodput.

``Oracle`` is the entry point; ``calibration`` fits its network/overlap parameters to the
Pollux measurements (``bench/oracle_calibration.py``). See docs/ORACLE.md.
"""

from jigsaw.oracle.oracle import Oracle, Prediction

__all__ = ["Oracle", "Prediction"]
