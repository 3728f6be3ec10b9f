"""What a LAS gang round keeps between rounds (part of
:mod:`jigsaw.policies.speed.round_memory`): the ranking with each job's side, and the running
gangs, fixed up together from one diff of each snapshot.

The three parts hold only together: the diff reports changes since the snapshot the other two
were last fixed up to. So they start over together: on a different cluster, when time goes
back (another world), and when fixing up raises (a job whose key cannot be computed), since
a part may have taken half the changes.
"""

from __future__ import annotations

import math

from jigsaw.model.cluster import Cluster
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.shared.fairness import LasConfig
from jigsaw.policies.speed.record_diff import SnapshotDiff
from jigsaw.policies.speed.running_gangs import RunningGangs
from jigsaw.policies.speed.sided_ranking import SidedLasRanking


class KeptLasRound:
    def __init__(self, config: LasConfig, cluster: Cluster) -> None:
        self.config = config
        self.ranking = SidedLasRanking(config)
        self.gangs = RunningGangs(cluster)
        self._diff = SnapshotDiff()
        self._now = -math.inf

    def sync(self, snapshot: Snapshot) -> None:
        """Bring the ranking and the gangs up to ``snapshot``."""
        now, cluster = snapshot.now, snapshot.cluster
        known = self.gangs.cluster
        if now < self._now or (known is not cluster and known != cluster):
            self._start_over(cluster)
        self._now = now
        try:
            changes = self._diff.changes(snapshot.running, snapshot.waiting)
            self.ranking.update(changes, now)
            self.gangs.update(changes.running_added, changes.running_removed)
        except Exception:
            self._start_over(cluster)
            raise

    def _start_over(self, cluster: Cluster) -> None:
        self.ranking = SidedLasRanking(self.config)
        self.gangs = RunningGangs(cluster)
        self._diff = SnapshotDiff()
        self._now = -math.inf
