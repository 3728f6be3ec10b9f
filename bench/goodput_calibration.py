"""The goodput model's step times fitted to Pollux's measurements, with their error.

    JIGSAW_SHARED_DIR=/work/shared .venv/bin/python -m bench.goodput_calibration

For each application of ``<shared>/traces/pollux/apps/``: the step-time model of
``jigsaw.goodput`` (Pollux's seven-parameter form) fitted to every row of ``placements.csv``
and ``scalability.csv``, its mean absolute percentage error on those rows, and held out
(5 folds by configuration, seed 0: every row predicted by a fit that never saw its placement).
Errors are of the synchronising step and of its compute part (step - sync). Prints one JSON
object; takes a few seconds.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict

from bench.sim_common import shared_traces
from jigsaw.goodput.calibration import calibrate, errors, held_out_errors, observations_of
from jigsaw.model.profiles import POLLUX_APPS
from jigsaw.oracle.calibration import load_app

FOLDS = 5
SEED = 0


def main() -> None:
    started = time.perf_counter()
    apps = {}
    for app in POLLUX_APPS:
        rows = load_app(shared_traces() / "pollux" / "apps" / app)
        model = calibrate(rows)
        apps[app] = {
            "in_sample": errors(model, observations_of(rows)).as_dict(),
            "held_out": held_out_errors(rows, FOLDS, SEED).as_dict(),
            "parameters": {name: round(value, 6) for name, value in asdict(model).items()},
        }
    print(
        json.dumps(
            {
                "bench": "goodput_calibration",
                "folds": FOLDS,
                "seed": SEED,
                "wall_s": round(time.perf_counter() - started, 1),
                "apps": apps,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
