"""Which jobs may be a round's guests: the candidates co-tenancy prices on its slots
(:mod:`.cotenancy`)."""

from __future__ import annotations

from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import Plan
from jigsaw.planning.planner import Planner
from jigsaw.policies.allocator.configurations import Problem
from jigsaw.policies.allocator.objective import Objective

MAX_GUESTS = 12
"""Guests a round prices at most (the guests running now, then the heaviest-weighted, then
the oldest)."""


def guest_candidates(
    problem: Problem, objective: Objective, planner: Planner
) -> list[tuple[int, Plan, float]]:
    """(job index, plan on one GPU, speedup alone on one GPU) of the jobs that may be
    guests: waiting or guests now, allowed one GPU; the ``MAX_GUESTS`` heaviest-weighted
    (then oldest) of them."""
    candidates: list[tuple[bool, float, float, int, float]] = []
    for index, view in enumerate(problem.views):
        job = view.job
        if (view.current and view.guest_of is None) or view.pinned:
            continue
        if job.state is JobState.ADMITTED:
            continue
        sizes = view.choices.sizes.tolist()
        if 1 not in sizes:
            continue
        speedup = float(view.choices.speedups[sizes.index(1)])
        weight = objective.weight(job)
        leaving = view.guest_of is None  # a guest now keeps its column first
        candidates.append((leaving, -weight, job.submitted_at, index, speedup))
    candidates.sort()
    found: list[tuple[int, Plan, float]] = []
    for _, _, _, index, speedup in candidates[:MAX_GUESTS]:
        view = problem.views[index]
        plan = (
            planner.resized_plan(view.job, 1)
            if view.goodput is not None
            else planner.start_plan(view.job)
        )
        if plan.num_workers == 1:
            found.append((index, plan, speedup))
    return found
