"""HiGHS is asked only when some answer with guests could cost less than the exclusive one.

:func:`~jigsaw.policies.allocator.solve.solve` skips the 0-1 program when a relaxation (every
guest column at no GPU and no host cost, no slot, goodput or completion row) finds no answer
cheaper than the exclusive optimum. That skip must never change a round's answer: in random
co-tenancy worlds, solving with it gives the same columns as always running the program and
keeping its answer by the same rule. The worlds must also tell the cases apart: some rounds
are skipped (free GPUs: a one-GPU job runs cheaper alone) and some packs are kept.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from jigsaw.model.cluster import Cluster, GpuId, Placement
from jigsaw.model.domain import Job, JobSpec
from jigsaw.model.plan import full_backprop
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.allocator import solve as solve_module
from jigsaw.policies.allocator.configurations import Problem
from jigsaw.policies.allocator.solve import Solution, solve, solve_exclusive
from tests.core.policies.test_allocator_decisions import ORACLE, _policy
from tests.core.support import running_job

NOW = 3_600.0
HOST_MODELS = ("resnet50_224", "resnet50_32", "resnet18_32")


def _world(seed: int) -> Snapshot:
    """One or two 4-GPU gangs that may host guests, small rigid gangs beside them, a
    queue of one-GPU jobs (the guest candidates) and a few larger ones, on 4 to 12 GPUs."""
    rng = random.Random(seed)
    nodes = rng.choice([1, 2, 3])
    cluster = Cluster.uniform(4 * nodes, 4, gpu_memory_bytes=ORACLE.hardware.memory_bytes)
    free: list[GpuId] = list(cluster.gpu_ids())
    running: list[Job] = []
    for index in range(rng.randint(1, 2)):
        model = rng.choice(HOST_MODELS)
        spec = JobSpec(f"h{index}", model, 4, rng.choice([3_000, 10**5, 10**6]), batch_size=128)
        placement: Placement = tuple(free[:4])
        del free[:4]
        plan = full_backprop(4, ORACLE.num_blocks(model))
        running.append(running_job(spec, placement, plan, NOW - rng.uniform(300.0, 5_000.0)))
        if len(free) < 4:
            break
    for index in range(rng.randint(0, 2)):
        size = rng.choice([1, 2])
        if len(free) < size + rng.randint(0, 2):
            break
        spec = JobSpec(f"r{index}", "resnet18_32", size, 10**6, batch_size=32)
        placement = tuple(free[:size])
        del free[:size]
        plan = full_backprop(size, ORACLE.num_blocks("resnet18_32"))
        running.append(running_job(spec, placement, plan, NOW - rng.uniform(300.0, 5_000.0)))
    waiting = [
        Job(
            f"g{index}",
            JobSpec(f"g{index}", "resnet18_32", 1, rng.choice([10**4, 10**5]), batch_size=32),
            NOW - rng.uniform(60.0, 3_000.0),
        )
        for index in range(rng.randint(1, 6))
    ]
    waiting += [
        Job(f"w{index}", JobSpec(f"w{index}", "resnet18_32", 4, 10**5), NOW - 100.0 * index)
        for index in range(rng.randint(0, 2))
    ]
    return Snapshot(NOW, cluster, tuple(waiting), tuple(running))


def _always_asked(problem: Problem) -> Solution:
    """The round as solved before the skip: HiGHS always, its answer kept by the same
    margin."""
    limits = _policy()._limits
    exclusive = solve_exclusive(problem)
    touched = solve_module._touched(problem, exclusive)
    joint = solve_module._solve_milp(problem, touched, exclusive, limits)
    margin = solve_module._margin(problem, exclusive.cost)
    if joint is not None and joint.cost < exclusive.cost - margin:
        return joint
    return exclusive


def _bound(problem: Problem) -> float:
    guests = solve_module._cheapest_guest_columns(problem)
    return solve_module._guest_bound(problem, solve_module._size_options(problem), guests)


def test_the_skip_never_changes_an_answer() -> None:
    skipped = kept = offered = 0
    for seed in range(60):
        for eta in (0.6, 1.0):
            policy = _policy(eta_of=lambda model, plan, eta=eta: eta)
            result = policy.solve_round(_world(seed))
            assert result is not None
            problem = result.problem
            if not any(column.kind == "guest" for column in problem.columns):
                continue
            offered += 1
            reference = _always_asked(problem)
            answer = solve(problem, policy._limits)
            assert answer.chosen == reference.chosen, (seed, eta)
            exclusive = solve_exclusive(problem)
            bound = _bound(problem)
            # A lower bound: no answer, the program's included, costs less.
            assert bound <= reference.cost <= exclusive.cost, (seed, eta)
            asked = bound < exclusive.cost - solve_module._margin(problem, exclusive.cost)
            skipped += not asked
            if reference.solver == "highs":
                assert asked, (seed, eta)  # a kept pack is never skipped
                kept += 1
    # The worlds tell the cases apart: rounds skipped, packs kept, rounds asked for nothing.
    assert offered >= 60 and skipped >= 10 and kept >= 5, (offered, skipped, kept)


def test_a_free_gpu_round_is_skipped_and_a_full_one_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A one-GPU job beside a host: with a free GPU it runs alone, cheaper than any slot,
    and HiGHS is not asked; with the cluster full the slot is its only way to run."""
    programs: list[int] = []
    run_program = solve_module._solve_milp

    def counted(problem: Problem, *args: Any) -> Solution | None:
        programs.append(problem.capacity)
        return run_program(problem, *args)

    monkeypatch.setattr(solve_module, "_solve_milp", counted)
    spec = JobSpec("host", "resnet50_224", 4, 10**6, batch_size=128)
    plan = full_backprop(4, ORACLE.num_blocks("resnet50_224"))
    host = running_job(spec, ((0, 0), (0, 1), (0, 2), (0, 3)), plan, NOW - 600.0)
    guest = Job("g", JobSpec("g", "resnet18_32", 1, 10**5, batch_size=32), NOW - 600.0)
    asked = {}
    for gpus in (4, 8):
        cluster = Cluster.uniform(gpus, 4, gpu_memory_bytes=ORACLE.hardware.memory_bytes)
        policy = _policy(eta_of=lambda model, plan: 1.0)
        result = policy.solve_round(Snapshot(NOW, cluster, (guest,), (host,)))
        assert result is not None
        problem = result.problem
        assert solve_module._cheapest_guest_columns(problem)
        exclusive = solve_exclusive(problem)
        margin = solve_module._margin(problem, exclusive.cost)
        asked[gpus] = _bound(problem) < exclusive.cost - margin
    assert asked == {4: True, 8: False}
    assert programs == [4]  # each round solved once; HiGHS only in the full one
