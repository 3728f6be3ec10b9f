"""The thread-simulated group (used for the efficiency runs) computes what gloo computes."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.spb.launch import spawn_local
from worker.spb.scenarios import Scenario, load_results, run_scenario
from worker.spb.thread_collectives import run_threads
from worker.spb.trainer import TrainerConfig


@pytest.mark.distributed
def test_thread_group_matches_gloo_processes(tmp_path: Path) -> None:
    config = TrainerConfig(model="digits_cnn", plan="0,1,1,3", batch_size=16, lr=0.05, seed=1)
    steps, world = 5, 4
    gloo = Scenario(config, steps, str(tmp_path / "gloo"))
    threads = Scenario(config, steps, str(tmp_path / "threads"))
    spawn_local(run_scenario, world, gloo)
    run_threads(world, lambda rank, coll: run_scenario(rank, coll, threads))
    a, b = load_results(tmp_path / "gloo", world), load_results(tmp_path / "threads", world)
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
