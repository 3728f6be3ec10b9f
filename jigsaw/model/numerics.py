"""Tolerances and units the core names once, so a comparison says which kind of closeness it
means and every module means the same by it.

Floats carry round-off: a gang's finish computed as ``start + iterations / rate`` and a round
boundary computed as ``k * round_s`` can differ in the last bits when they are, in fact, the
same moment. Each constant below is the one tolerance for one kind of quantity.
"""

from __future__ import annotations

GIB = 1024**3
"""Bytes in a gibibyte (memory sizes, limits and footprints are in bytes)."""

TIME_EPS_S = 1e-9
"""Two moments (seconds of virtual or wall time) this close are the same moment: an executor
event due at ``now + TIME_EPS_S`` is due now, a round boundary that close has been reached."""

LOAD_EPS = 1e-9
"""Two GPU loads or fractions this close are equal (a residual that is short of a threshold
by less than this still fits)."""

INTEGER_EPS = 1e-9
"""A ratio this close to an integer counts as that integer before ``floor`` or ``ceil``
(``600 / 60`` is 10 rounds, not 11, whatever the last bit says)."""

ROUNDOFF = 1e-12
"""Below any quantity that means something: a load, fraction or weight no larger than this is
float round-off, i.e. zero."""
