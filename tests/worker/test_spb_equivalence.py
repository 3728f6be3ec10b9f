"""The thread-simulated group (used for the efficiency runs) computes what gloo computes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.worker.spb_gloo import EQUIVALENCE, EQUIVALENCE_STEPS, WORLD
from worker.spb.scenarios import Scenario, load_results, run_scenario
from worker.spb.thread_collectives import run_threads


@pytest.mark.distributed
def test_thread_group_matches_gloo_processes(
    tmp_path: Path, spb_gloo: dict[str, list[dict[str, Any]]]
) -> None:
    # The gloo side ran in the session's one process group (tests/worker/spb_gloo.py).
    steps, world = EQUIVALENCE_STEPS, WORLD
    threads = Scenario(EQUIVALENCE, steps, str(tmp_path / "threads"))
    run_threads(world, lambda rank, coll: run_scenario(rank, coll, threads))
    a, b = spb_gloo["equivalence"], load_results(tmp_path / "threads", world)
    assert len(a[0]["states"]) == len(b[0]["states"]) == steps
    for rank in range(world):
        for step in range(steps):
            # Only the all-reduce summation order differs between the backends.
            diff = (a[rank]["states"][step] - b[rank]["states"][step]).abs().max().item()
            assert diff <= 1e-5, f"rank {rank} step {step}: |gloo - threads| = {diff}"
            assert abs(a[rank]["losses"][step] - b[rank]["losses"][step]) <= 1e-5
            assert a[rank]["metrics"][step]["bytes_sent"] == b[rank]["metrics"][step]["bytes_sent"]
            assert (
                a[rank]["metrics"][step]["saved_activation_bytes"]
                == b[rank]["metrics"][step]["saved_activation_bytes"]
            )
