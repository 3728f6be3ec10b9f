"""The waiting jobs a size program need not see: those that wait whatever it decides.

pollux and jigsaw price every job at every size it may take and hand the prices to one
dynamic program (:func:`~jigsaw.policies.shared.pollux_allocation.choose_options`). In a deep
backlog most of those jobs are rigid jobs that have never run, and the program leaves most of
them out whatever else it chooses (:func:`~jigsaw.policies.shared.pollux_allocation.
_dominated_pairs`). This module finds them before anything is priced, by a cheaper form of the
same rule, so a round builds views, columns and placements only for the jobs that could start.

**The rule.** Call a waiting job *fresh* when the policy prices it by its size alone (the
goodput source knows nothing of it: its options are off or the size ``n`` it asked for) and
it has never run (no attempt, no resize, no attained service). Two fresh jobs of one *class*
(same ``n``, and whatever else the policy's price reads of a job, such as its priority) have
the same price of waiting, and the earlier one's price of running is at most the later one's:
the only thing of the price that differs between them is the launch discount,
``age / (age + launch)``, and it only grows with age. So of a class, an earlier job gains at
least as much by running as a later one, and where the gains are equal the program's tie
rule runs the earlier one. At most ``capacity // n`` jobs of size ``n`` run in any answer;
so a fresh job behind ``capacity // n`` others of its class runs in no answer the program
returns, and leaving it out of the round changes nothing of the answer (the dominance
argument of ``_dominated_pairs``, whose budget is never above ``capacity``). jigsaw's rounds
with guest columns also run HiGHS, whose pick among equally good answers depends on how the
program is presented: there a tie among identical jobs may break another way
(docs/SCHEDULER.md, "jigsaw").

A class may be given a larger quota (``quota_of``): jigsaw keeps its first guest candidates,
which co-tenancy ranks among the waiting one-GPU jobs (:mod:`~jigsaw.policies.allocator.
cotenancy`), even where no GPU of their own could be theirs.

tests/core/policies/test_backlog.py checks the rule against rounds built from every job.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from jigsaw.goodput.source import JobGoodput
from jigsaw.model.domain import Job


@dataclass(frozen=True, slots=True)
class Backlog:
    """The waiting jobs a round considers, in their order, with what the source knows of each,
    and how many it set aside (they wait this round, whatever it decides)."""

    waiting: list[Job]
    goodputs: list[JobGoodput | None]
    classes_aside: list[tuple[Job, int]] = field(default_factory=list)
    """Per class with jobs set aside, its first such job and how many (they all cost the
    same to leave waiting)."""

    @property
    def set_aside(self) -> int:
        return sum(count for _, count in self.classes_aside)


def split_backlog(
    waiting: Sequence[Job],
    goodput_of: Callable[[Job], JobGoodput | None],
    capacity: int,
    class_of: Callable[[Job], Hashable] | None = None,
    quota_of: Callable[[int], int] | None = None,
    rank_of: Callable[[Job], float] | None = None,
) -> Backlog:
    """``waiting`` in arrival order (earliest first; the order the round lists them in) less
    the fresh jobs behind their class's quota: ``capacity // n`` for jobs of size ``n``
    (``quota_of(n)`` where given, never less than that). ``class_of``: what of a fresh job
    its price reads besides its size (the size is always part of the class; ``None``:
    nothing else). ``rank_of``: where fresh jobs of one class differ in a weight that scales
    their whole price (and nothing else of it differs, their discounts all 1), that weight:
    the heavier gains more by running, so a class keeps its quota of heaviest jobs, the
    earliest first among equals (the program's tie rule), and each job set aside is listed
    on its own (their prices differ)."""
    if rank_of is not None:
        return _split_ranked(waiting, goodput_of, capacity, class_of, quota_of, rank_of)
    kept: list[Job] = []
    goodputs: list[JobGoodput | None] = []
    seen: dict[tuple[int, Hashable], int] = {}
    aside: dict[tuple[int, Hashable], tuple[Job, int]] = {}
    for job in waiting:
        goodput = goodput_of(job)
        key = _class_key(job, goodput, capacity, class_of)
        if key is not None:
            count = seen.get(key, 0)
            quota = _quota(key[0], capacity, quota_of)
            if count >= quota:
                first, behind = aside.get(key, (job, 0))
                aside[key] = (first, behind + 1)
                continue
            seen[key] = count + 1
        kept.append(job)
        goodputs.append(goodput)
    return Backlog(kept, goodputs, list(aside.values()))


def _split_ranked(
    waiting: Sequence[Job],
    goodput_of: Callable[[Job], JobGoodput | None],
    capacity: int,
    class_of: Callable[[Job], Hashable] | None,
    quota_of: Callable[[int], int] | None,
    rank_of: Callable[[Job], float],
) -> Backlog:
    """:func:`split_backlog` with a weight that orders each class (heaviest, then earliest)."""
    goodputs_all = [goodput_of(job) for job in waiting]
    members: dict[tuple[int, Hashable], list[tuple[float, int]]] = {}
    for index, (job, goodput) in enumerate(zip(waiting, goodputs_all, strict=True)):
        key = _class_key(job, goodput, capacity, class_of)
        if key is not None:
            members.setdefault(key, []).append((-rank_of(job), index))
    aside_at: set[int] = set()
    for (size, _), ranked in members.items():
        quota = _quota(size, capacity, quota_of)
        if len(ranked) > quota:
            ranked.sort()
            aside_at.update(index for _, index in ranked[quota:])
    kept = [job for index, job in enumerate(waiting) if index not in aside_at]
    goodputs = [g for index, g in enumerate(goodputs_all) if index not in aside_at]
    aside = [(waiting[index], 1) for index in sorted(aside_at)]
    return Backlog(kept, goodputs, aside)


def _class_key(
    job: Job,
    goodput: JobGoodput | None,
    capacity: int,
    class_of: Callable[[Job], Hashable] | None,
) -> tuple[int, Hashable] | None:
    """A fresh rigid job's class (its size, and what else its price reads); ``None`` for a job
    the split never sets aside."""
    size = job.spec.workers
    if goodput is None and _fresh(job) and 0 < size <= capacity:
        return (size, class_of(job) if class_of is not None else None)
    return None


def _quota(size: int, capacity: int, quota_of: Callable[[int], int] | None) -> int:
    quota = capacity // size
    return max(quota, quota_of(size)) if quota_of is not None else quota


def _fresh(job: Job) -> bool:
    """Never run: its price carries no restart, no attained service, only its launch."""
    return (
        job.attempt == 0
        and job.resizes == 0
        and job.attained_gpu_seconds == 0
        and not job.state.holds_resources
    )
