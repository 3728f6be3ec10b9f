"""``timeslice``: a Gandiva-style peer. Waiting one-GPU jobs share running jobs' GPUs.

Gandiva (Xiao et al., OSDI 2018) time-slices GPUs between jobs. This policy does the same
on jigsaw's mechanism, with SPB taken out, so a table can show what SPB adds over plain
time-slicing:

- every job runs full backprop (its catalog has no SPB plans), and nobody ever switches plan;
- elastic jobs keep their size (co-tenancy is the only lever; jigsaw's grow/shrink rule is
  off), so a table row shows time-slicing alone;
- gangs are ranked, kept in the fair set, placed and preempted as jigsaw does them
  (:mod:`jigsaw.policies.jigsaw`, steps 1-4);
- a one-GPU job that finds no free GPU may take turns on a GPU that holds a single worker of
  a running gang of any size (:class:`~jigsaw.policies.jigsaw_parts.slack.SlackMarket` with
  ``share_full_backprop``). The turns are priced by the co-location model through the
  oracle's timings, and jigsaw's gain rule decides: the normalised goodput summed over the
  jobs concerned must not fall (rise by ``pack_gain``, 0 by default), the host keeps
  ``host_keep`` of its goodput, and (``completion_guard``) the affected jobs complete faster:
  the guest's remaining work is shorter than what the turns cost its hosts.

``pack_gain`` is 0 here, not jigsaw's 0.25: jigsaw's bar pays for a host giving up η and a
lease boundary to switch plan; a time-slice costs the host neither, and Gandiva shares a GPU
whenever a job waits. Under time-slicing that conserves GPU time, two workers that keep
their GPU busy all the time then share like a processor-sharing queue (each at half speed,
gain 0), and a worker that leaves its GPU idle part of each iteration (exposed
communication, a straggler's wait) gives its guest that idle time (gain > 0).

Options are :class:`TimesliceConfig`'s (jigsaw's, with that one default changed); those
about SPB plans (``fair_packing_ratio``, ``backfill_packing_ratio``, ``replan_gain``,
``min_plan_hold_s``) have nothing to act on.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from jigsaw.oracle import Oracle
from jigsaw.planning.planner import Planner
from jigsaw.policies.base import register
from jigsaw.policies.jigsaw import JigsawConfig, JigsawPolicy
from jigsaw.policies.shared.plans import EtaOf


@dataclass(frozen=True, slots=True)
class TimesliceConfig(JigsawConfig):
    pack_gain: float = 0.0
    """A guest shares a GPU when the normalised goodput summed over the jobs concerned rises
    by at least this much (jigsaw's bar, 0.25, pays for a plan switch timeslice never makes)."""


class TimeslicePolicy(JigsawPolicy):
    name = "timeslice"
    sizes_elastic_jobs = False

    def __init__(
        self,
        oracle: Oracle | None = None,
        *,
        planner: Planner,
        config: TimesliceConfig | None = None,
        eta_of: EtaOf | None = None,
        incremental: bool = True,
    ) -> None:
        chosen = config if config is not None else TimesliceConfig()
        super().__init__(
            oracle,
            config=chosen,
            eta_of=eta_of,
            spb=False,
            incremental=incremental,
            planner=planner,
        )
        self._slack = replace(self._slack, share_full_backprop=True)


register("timeslice", uses=frozenset({"oracle", "planner"}))(TimeslicePolicy)
