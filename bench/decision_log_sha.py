"""Decision-log fingerprint: the SHA-256 of the decision log of a Philly replay, per policy.

A refactor that must not change scheduling proves it by printing the same hashes before and
after (docs/BENCHMARKS.md, "Scheduler and simulator speed"). Prints one JSON object.

    .venv/bin/python -m bench.decision_log_sha --limit 4000 --policies las,jigsaw
"""

from __future__ import annotations

import argparse
import json

from bench.sim_common import prepare, shared_traces
from jigsaw.simulator import SimulationSetup, make_oracle, replay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=512)
    parser.add_argument("--limit", type=int, default=4_000)
    parser.add_argument("--policies", default="las,jigsaw")
    args = parser.parse_args()
    setup = SimulationSetup(gpus=args.gpus, gpus_per_node=8)
    oracle = make_oracle(setup)
    rates, arrivals = prepare(shared_traces() / "philly.csv", setup, oracle, limit=args.limit)
    hashes = {}
    for name in args.policies.split(","):
        summary = replay(arrivals, name, rates, oracle, setup).summary
        hashes[name] = {
            "decision_log_sha256": summary["decision_log_sha256"],
            "avg_jct_s": summary["avg_jct_s"],
            "starts_preempts_replans": [
                summary.get("starts"),
                summary["preemptions"],
                summary["replans"],
            ],
        }
    print(
        json.dumps(
            {
                "bench": "decision_log_sha",
                "jobs": len(arrivals),
                "gpus": args.gpus,
                "policies": hashes,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
