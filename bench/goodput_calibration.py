"""The goodput model's step times fitted to Pollux's measurements, with their error.

    JIGSAW_SHARED_DIR=/work/shared .venv/bin/python -m bench.goodput_calibration

For each application of ``<shared>/traces/pollux/apps/``: the step-time model of
``jigsaw.goodput`` (Pollux's seven-parameter form) fitted to every row of ``placements.csv``
and ``scalability.csv``, its mean absolute percentage error on those rows, and held out
(5 folds by configuration, seed 0: every row predicted by a fit that never saw its placement).
Errors are of the synchronising step and of its compute part (step - sync).

Beside them, ``oracle_prior``: the same model fitted to the oracle's predictions instead
(:func:`jigsaw.goodput.prior.oracle_step_times`, the ``t4`` preset Pollux measured on, at the
application's median local batch, up to 64 workers on 4-GPU nodes), scored on every row: what
a job's step times are believed to be before its first report. Prints one JSON object; takes
a few seconds.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict

from bench.sim_common import shared_traces
from jigsaw.goodput.calibration import calibrate, errors, held_out_errors, observations_of
from jigsaw.goodput.prior import oracle_step_times
from jigsaw.model.hardware import preset
from jigsaw.model.profiles import POLLUX_APPS
from jigsaw.oracle import Oracle
from jigsaw.oracle.calibration import load_app

FOLDS = 5
SEED = 0
PRIOR_HARDWARE = "t4"
PRIOR_GPUS_PER_NODE = 4
PRIOR_MAX_REPLICAS = 64


def main() -> None:
    started = time.perf_counter()
    apps = {}
    oracle = Oracle(preset(PRIOR_HARDWARE))
    for app in POLLUX_APPS:
        rows = load_app(shared_traces() / "pollux" / "apps" / app)
        model = calibrate(rows)
        median_batch = sorted(r.local_bsz for r in rows)[len(rows) // 2]
        prior = oracle_step_times(
            oracle, app, median_batch, PRIOR_GPUS_PER_NODE, PRIOR_MAX_REPLICAS
        )
        apps[app] = {
            "in_sample": errors(model, observations_of(rows)).as_dict(),
            "held_out": held_out_errors(rows, FOLDS, SEED).as_dict(),
            "oracle_prior": errors(prior, observations_of(rows)).as_dict(),
            "parameters": {name: round(value, 6) for name, value in asdict(model).items()},
        }
    print(
        json.dumps(
            {
                "bench": "goodput_calibration",
                "folds": FOLDS,
                "seed": SEED,
                "prior": {
                    "hardware": PRIOR_HARDWARE,
                    "gpus_per_node": PRIOR_GPUS_PER_NODE,
                    "max_replicas": PRIOR_MAX_REPLICAS,
                },
                "wall_s": round(time.perf_counter() - started, 1),
                "apps": apps,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
