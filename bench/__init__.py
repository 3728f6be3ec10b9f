"""JigSaw's benchmarks: one script per measurement, each printing the figures docs/BENCHMARKS.md
quotes.

``bench`` is a package. Run a script as a module from the repository root, which puts the root
(and so ``jigsaw``, ``worker``, ``api`` and ``bench``) on the path::

    .venv/bin/python -m bench.sim_gain --workloads pollux

Scripts share code through ``bench.<module>`` imports (``from bench.sim_common import ...``);
:func:`command_line` is the command a result records as its provenance.
"""

from __future__ import annotations

import sys
from pathlib import Path


def command_line() -> str:
    """The command that ran this process, as a user types it: ``python -m bench.<script> ...``."""
    script = Path(sys.argv[0])
    if script.parent.name == "bench" and script.suffix == ".py":
        return " ".join(["python", "-m", f"bench.{script.stem}", *sys.argv[1:]])
    return " ".join(["python", *sys.argv])
