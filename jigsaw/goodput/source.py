"""Where a goodput policy learns what each job can do: the seam between the policy and the
jobs' reports.

A job's agent (AdaptDL's, in Pollux) measures its step times at every shape it runs and its
gradient noise, and reports them; the scheduler sizes jobs from those reports. The service
will feed this seam from lease reports; the simulator feeds it from the data a replay
simulates (:class:`jigsaw.simulator.pollux_agents.PolluxAgents`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from jigsaw.goodput.model import BatchLimits, GoodputModel
from jigsaw.model.domain import Job


@dataclass(frozen=True, slots=True)
class JobGoodput:
    limits: BatchLimits
    model: GoodputModel | None
    """``None`` until the job has measured a step time (it has never run)."""
    largest_measured: int
    """The most workers the job has measured its step time on (0: none yet)."""


class GoodputSource(Protocol):
    def job_goodput(self, job: Job, now: float) -> JobGoodput | None:
        """What ``job`` has reported by ``now``; ``None``: nothing can be known (not an
        elastic data-parallel job this source models)."""
        ...
