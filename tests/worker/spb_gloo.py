"""Every SPB run that needs real gloo processes, in ONE process group per test session.

Spawning four ranks costs 20-30 s on two shared cores (each process imports torch), and each
run below takes a second or two, so they go back to back in a single ``spawn_local`` (each
into its own directory; every run builds a fresh trainer and seeds its own RNGs). The tests
in test_spb_distributed.py and test_spb_equivalence.py read the recorded results through the
session fixture ``spb_gloo`` (tests/worker/conftest.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jigsaw.model.plan import SPBPlan, full_backprop, staircase, uniform
from worker.spb.launch import spawn_local
from worker.spb.scenarios import Scenario, load_results, run_scenarios
from worker.spb.trainer_setup import TrainerConfig

WORLD = 4
CNN_BLOCKS = 4
"""digits_cnn's K."""
CNN = TrainerConfig(
    model="digits_cnn", plan=full_backprop(WORLD, CNN_BLOCKS), batch_size=16, lr=0.05, seed=3
)
STAIRCASE = TrainerConfig(**{**CNN.__dict__, "plan": staircase(WORLD, CNN_BLOCKS)})
STAIRCASE_STEPS = 3
# test_spb_equivalence: the same run on gloo here and on the thread group in the test.
EQUIVALENCE = TrainerConfig(
    model="digits_cnn", plan=SPBPlan((0, 1, 1, 3), CNN_BLOCKS), batch_size=16, lr=0.05, seed=1
)
EQUIVALENCE_STEPS = 5


def gloo_runs(root: Path) -> dict[str, tuple[str, Scenario]]:
    """Name -> (kind, scenario), in execution order ("resumed" reads "full"'s checkpoint)."""
    checkpoint = str(root / "ckpt")
    resume_switches = {5: uniform(WORLD, CNN_BLOCKS, 1)}  # pending at checkpoint time

    def out(name: str) -> str:
        return str(root / name)

    return {
        # plan none equals torch DDP
        "none": ("spb", Scenario(CNN, 5, out("none"))),
        "ddp": ("ddp", Scenario(CNN, 5, out("ddp"))),
        # staircase: the applied gradients are the mean over each block's contributors
        "staircase": (
            "spb",
            Scenario(STAIRCASE, STAIRCASE_STEPS, out("staircase"), record_grads=True),
        ),
        # a plan switch mid-run against the same run without switches
        "switched": (
            "spb",
            Scenario(
                CNN,
                8,
                out("switched"),
                switches={3: STAIRCASE.plan, 6: uniform(WORLD, CNN_BLOCKS, 2)},
            ),
        ),
        "steady": ("spb", Scenario(CNN, 8, out("steady"))),
        # checkpoint at iteration 3, then a fresh trainer resumes from it
        "full": ("spb", Scenario(STAIRCASE, 7, out("full"), resume_switches, 3, checkpoint)),
        "resumed": (
            "spb",
            Scenario(STAIRCASE, 7, out("resumed"), resume_switches, resume_from=checkpoint),
        ),
        "equivalence": ("spb", Scenario(EQUIVALENCE, EQUIVALENCE_STEPS, out("equivalence"))),
    }


def run_all(root: Path) -> dict[str, list[dict[str, Any]]]:
    """Spawn WORLD gloo ranks once, run every scenario, return each one's per-rank records."""
    runs = gloo_runs(root)
    spawn_local(run_scenarios, WORLD, list(runs.values()))
    return {name: load_results(scenario.out_dir, WORLD) for name, (_, scenario) in runs.items()}
