"""Replay speed: every Philly job (82,247) under fifo, las and jigsaw on 512 GPUs.

Targets on the 2-core box: fifo <= 60 s, las <= 120 s, jigsaw <= 300 s of wall time per
replay (trace loading, about 2 s, not included). Policies run one after the other in one
process, so the ratios compare like with like. Each row also has ``cpu_s``, the process CPU
time of the replay: on a shared box it moves less with other tenants' load than wall time.
Prints one JSON object.

    .venv/bin/python -m bench.sim_speed            # the whole trace (tens of minutes)
    .venv/bin/python -m bench.sim_speed --quick    # the first 3,000 jobs
"""

from __future__ import annotations

import argparse
import json
import time

from bench.sim_common import prepare, run_policy, shared_traces
from jigsaw.simulator import SimulationSetup, make_oracle

TARGETS_S = {"fifo": 60.0, "las": 120.0, "jigsaw": 300.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=512)
    parser.add_argument("--policies", default="fifo,las,jigsaw")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--quick", action="store_true", help="first 3,000 jobs only")
    args = parser.parse_args()
    limit = 3_000 if args.quick else args.limit
    setup = SimulationSetup(gpus=args.gpus, gpus_per_node=8)
    oracle = make_oracle(setup)
    started = time.perf_counter()
    rates, arrivals = prepare(shared_traces() / "philly.csv", setup, oracle, limit=limit)
    load_s = time.perf_counter() - started
    rows = {}
    for name in args.policies.split(","):
        cpu_started = time.process_time()
        row = run_policy(name, arrivals, rates, oracle, setup)
        row["cpu_s"] = time.process_time() - cpu_started
        row["target_s"] = TARGETS_S.get(name)
        row["meets_target"] = (
            None if limit is not None or name not in TARGETS_S else row["wall_s"] <= TARGETS_S[name]
        )
        rows[name] = row
    fifo_wall = rows.get("fifo", {}).get("wall_s")
    print(
        json.dumps(
            {
                "bench": "sim_speed",
                "trace": "philly.csv",
                "jobs": len(arrivals),
                "gpus": args.gpus,
                "load_s": load_s,
                "wall_s": {name: row["wall_s"] for name, row in rows.items()},
                "wall_ratio_vs_fifo": {
                    name: row["wall_s"] / fifo_wall for name, row in rows.items() if fifo_wall
                },
                "results": rows,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
