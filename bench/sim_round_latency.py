"""One scheduling round with 2,000 active jobs on 1,024 GPUs: jigsaw vs las, side by side.

Builds a steady-state cluster (128 nodes x 8 V100s): about half the jobs running on compact
placements (full backprop), the rest waiting, a Philly-like mix of gang sizes and models.
Each round advances virtual time by the round length (so LAS queues and attained service
move) and times ``policy.decide(snapshot)`` only; the snapshot is built outside the timer
(the cycle builds it for every policy alike). Prints one JSON object.

    .venv/bin/python -m bench.sim_round_latency            # 20 rounds
    .venv/bin/python -m bench.sim_round_latency --quick    # 5 rounds
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from dataclasses import replace

from jigsaw.model.cluster import Cluster
from jigsaw.model.domain import Job, JobSpec, transition
from jigsaw.model.hardware import preset
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.oracle import Oracle
from jigsaw.policies.shared.placement import compact_placement, group_by_node, take
from jigsaw.simulator.run import make_policy
from jigsaw.traces.model_mix import assign_model

SIZES = ((1, 0.80), (2, 0.07), (4, 0.07), (8, 0.05), (16, 0.01))
TARGET_MS = 100.0


def workload(num_jobs: int, cluster: Cluster, seed: int, oracle: Oracle) -> list[Job]:
    rng = random.Random(seed)
    free = group_by_node(cluster.gpu_ids())
    jobs: list[Job] = []
    for index in range(num_jobs):
        workers = rng.choices([s for s, _ in SIZES], [w for _, w in SIZES])[0]
        model = assign_model(workers, index, seed)
        spec = JobSpec(f"job{index}", model, workers, 10**6, priority=rng.choice([0, 0, 0, 1]))
        submitted = float(rng.uniform(0.0, 86_400.0))
        job = Job(f"j{index:05d}", spec, submitted_at=submitted)
        placement = compact_placement(free, workers) if index % 2 == 0 else None
        if placement is not None:
            take(free, placement)
            job, _ = transition(
                job,
                JobState.ADMITTED,
                reason="bench",
                at=submitted,
                actor="bench",
                placement=placement,
                plan=full_backprop(workers, oracle.num_blocks(model)),
            )
            job, _ = transition(job, JobState.RUNNING, reason="bench", at=submitted, actor="bench")
        else:
            job = replace(job, attained_gpu_seconds=rng.choice([0.0, 0.0, 5_000.0, 50_000.0]))
        jobs.append(job)
    return jobs


def time_rounds(
    name: str, oracle: Oracle, cluster: Cluster, jobs: list[Job], rounds: int, round_s: float
) -> list[float]:
    policy = make_policy(name, oracle)
    latencies = []
    for round_index in range(rounds + 1):
        now = 86_400.0 + round_index * round_s
        # Decisions are not applied, so every round faces the same gangs, none on a plan
        # hold (the hold is read off the jobs): each round weighs every switch again.
        snapshot = Snapshot.build(now, cluster, jobs)
        started = time.perf_counter()
        policy.decide(snapshot)
        elapsed = (time.perf_counter() - started) * 1000.0
        if round_index > 0:  # round 0 warms the oracle caches, as the first round does live
            latencies.append(elapsed)
    return latencies


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": statistics.median(ordered),
        "p99_ms": ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
        "max_ms": ordered[-1],
        "mean_ms": statistics.fmean(ordered),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2_000)
    parser.add_argument("--gpus", type=int, default=1_024)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--round-seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="5 rounds (smoke run)")
    args = parser.parse_args()
    rounds = 5 if args.quick else args.rounds
    oracle = Oracle(preset("v100"))
    cluster = Cluster.uniform(args.gpus, 8)
    jobs = workload(args.jobs, cluster, args.seed, oracle)
    results = {
        name: summary(time_rounds(name, oracle, cluster, jobs, rounds, args.round_seconds))
        for name in ("jigsaw", "las")
    }
    running = sum(job.state.holds_resources for job in jobs)
    print(
        json.dumps(
            {
                "bench": "sim_round_latency",
                "jobs": args.jobs,
                "running": running,
                "waiting": args.jobs - running,
                "gpus": args.gpus,
                "rounds": rounds,
                "jigsaw": results["jigsaw"],
                "las": results["las"],
                "ratio_p50_jigsaw_over_las": results["jigsaw"]["p50_ms"] / results["las"]["p50_ms"],
                "target_ms": TARGET_MS,
                "meets_target": results["jigsaw"]["p99_ms"] <= TARGET_MS,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
