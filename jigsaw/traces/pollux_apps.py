"""A Pollux application as Pollux's simulator replays it: curves, batch split, step time.

Built from ``pollux/apps/<app>/``: the validation curves (:mod:`jigsaw.traces.pollux_curves`)
and the measured step/sync times of ``placements.csv`` and ``scalability.csv``. Semantics
follow petuum/adaptdl (branch osdi21-artifact) ``simulator/applications.py`` and
``simulator/simulator.py``, read for meaning, reimplemented here:

- **Batch split** (:meth:`PolluxApp.split`): a job with ``r`` replicas and global batch ``B``
  runs local batch ``ceil(B / r)``, split into ``accum + 1`` micro-batches of at most the
  largest measured local batch (at least 2 on a single replica whose batch exceeds the
  initial one), never more than the largest validated batch in all.
- **Seconds per iteration** (:meth:`PolluxApp.iteration_s`): ``step + accum (step - sync)``
  at the placement (per-node GPU counts, rotated to its smallest form), linear in the local
  batch over ``placements.csv`` rows of that placement. A placement not measured there uses
  the rows (placements averaged, plus ``scalability.csv``) of the nearest (nodes, replicas)
  configuration: Pollux interpolates in 3-D (Delaunay) instead; docs/SCHEDULER.md lists this.
- **Work** (:meth:`PolluxApp.iterations`): the iterations a fixed (replicas, batch) job needs
  to finish every epoch (:meth:`AppCurves.iterations_to_finish` at the split's batch).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from jigsaw.model.errors import TraceFormatError
from jigsaw.oracle.calibration import Measurement, load_app
from jigsaw.traces.pollux_curves import AppCurves, has_curves, load_app_curves
from jigsaw.traces.record import Elasticity

MAX_LOCAL_BSZ_OVERRIDE = {"yolov3": 8}
"""Pollux caps yolov3's micro-batch below its measured maximum (its ``applications.py``)."""
RIGID_APPS = frozenset({"ncf"})
"""Pollux's simulator runs these at one replica and their trace batch under every policy."""


@dataclass(frozen=True, slots=True)
class BatchSplit:
    replicas: int
    atomic: int
    """Samples per replica per micro-batch."""
    accum: int
    """Extra micro-batches accumulated before each synchronisation."""

    @property
    def batch(self) -> int:
        return self.replicas * self.atomic * (self.accum + 1)


@dataclass(frozen=True, slots=True)
class _Rows:
    local_bsz: tuple[float, ...]
    step: tuple[float, ...]
    sync: tuple[float, ...]

    def at(self, local_bsz: float) -> tuple[float, float]:
        return _interp(local_bsz, self.local_bsz, self.step), _interp(
            local_bsz, self.local_bsz, self.sync
        )


class PolluxApp:
    def __init__(self, name: str, curves: AppCurves, measurements: list[Measurement]) -> None:
        if not measurements:
            raise TraceFormatError(name, 0, f"{name}: no step-time measurements")
        self.name = name
        self.curves = curves
        by_placement: dict[str, list[Measurement]] = defaultdict(list)
        by_config: dict[tuple[int, int], dict[int, list[tuple[float, float]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for row in measurements:
            if not row.placement.startswith("n"):
                by_placement[row.placement].append(row)
            by_config[(row.num_nodes, row.num_replicas)][row.local_bsz].append(
                (row.step_time, row.sync_time)
            )
        self._placements = {key: _rows(rows) for key, rows in by_placement.items()}
        self._configs = {
            key: _Rows(
                tuple(float(b) for b in sorted(sizes)),
                tuple(_mean([s for s, _ in sizes[b]]) for b in sorted(sizes)),
                tuple(_mean([y for _, y in sizes[b]]) for b in sorted(sizes)),
            )
            for key, sizes in by_config.items()
        }
        placement_rows = [r for rows in by_placement.values() for r in rows] or measurements
        self.min_local_bsz = min(r.local_bsz for r in placement_rows)
        self.max_local_bsz = MAX_LOCAL_BSZ_OVERRIDE.get(
            name, max(r.local_bsz for r in placement_rows)
        )
        self._iterations: dict[tuple[int, int], float] = {}

    def elasticity(self, replicas: int, worker_batch: int) -> Elasticity | None:
        """How Pollux's own policy may size a job that asked for ``replicas`` x
        ``worker_batch``: any count from 1 up to one micro-batch of the smallest measured size
        per replica at the largest validated batch, and any global batch in the validated
        range (widened to hold the request, which the per-replica ceiling may put a few
        samples past it). ``None`` for the applications Pollux keeps rigid."""
        if self.name in RIGID_APPS:
            return None
        initial = replicas * worker_batch
        return Elasticity(
            min_workers=1,
            max_workers=max(self.max_replicas, replicas),
            batch_policy="adaptive",
            min_global_batch=min(self.curves.init_batch_size, initial),
            max_global_batch=max(self.curves.max_batch_size, initial),
        )

    @property
    def max_replicas(self) -> int:
        """Pollux's cap: the largest validated batch in micro-batches of the smallest size."""
        return max(1, int(self.curves.max_batch_size // self.min_local_bsz))

    def split(self, replicas: int, global_batch: int) -> BatchSplit:
        local = math.ceil(global_batch / replicas - 1e-8)
        accum = math.ceil(local / self.max_local_bsz - 1e-8) - 1
        if replicas == 1 and global_batch > self.curves.init_batch_size:
            accum = max(1, accum)
        atomic = math.ceil(local / (accum + 1) - 1e-8)
        atomic = min(atomic, int(self.curves.max_batch_size / (replicas * (accum + 1))))
        return BatchSplit(replicas, max(atomic, 1), accum)

    def iterations(self, replicas: int, global_batch: int) -> float:
        key = (replicas, global_batch)
        cached = self._iterations.get(key)
        if cached is None:
            split = self.split(replicas, global_batch)
            cached = self._iterations[key] = self.curves.iterations_to_finish(split.batch)
        return cached

    def iteration_s(self, per_node: tuple[int, ...], split: BatchSplit) -> float:
        """Seconds per iteration (all micro-batches and the synchronisation)."""
        step, sync = self.step_sync(per_node, split.atomic)
        return step + split.accum * max(step - sync, 0.0)

    def step_sync(self, per_node: tuple[int, ...], local_bsz: float) -> tuple[float, float]:
        counts = tuple(c for c in per_node if c > 0)
        rotated = min(counts[i:] + counts[:i] for i in range(len(counts)))
        rows = self._placements.get("".join(map(str, rotated)))
        if rows is not None:
            return rows.at(local_bsz)
        nodes, replicas = min(len(counts), 16), sum(counts)
        nearest = min(
            self._configs,
            key=lambda cfg: (abs(cfg[1] - replicas), abs(cfg[0] - nodes), cfg),
        )
        return self._configs[nearest].at(local_bsz)


def find_apps_dir(workload: Path) -> Path | None:
    """``apps/`` beside a Pollux workload: ``<root>/workloads*/w.csv`` -> ``<root>/apps``;
    also ``<dir>/pollux/apps`` and ``<dir>/apps`` (excerpts)."""
    for candidate in (
        workload.parent.parent / "apps",
        workload.parent / "pollux" / "apps",
        workload.parent / "apps",
    ):
        if candidate.is_dir():
            return candidate
    return None


def load_pollux_app(apps_dir: Path, name: str) -> PolluxApp:
    directory = apps_dir / name
    return PolluxApp(name, load_app_curves(directory), load_app(directory))


def app_has_data(apps_dir: Path, name: str) -> bool:
    directory = apps_dir / name
    return (
        has_curves(apps_dir, name)
        and (directory / "placements.csv").is_file()
        and (directory / "scalability.csv").is_file()
    )


def _rows(rows: list[Measurement]) -> _Rows:
    ordered = sorted(rows, key=lambda r: r.local_bsz)
    return _Rows(
        tuple(float(r.local_bsz) for r in ordered),
        tuple(r.step_time for r in ordered),
        tuple(r.sync_time for r in ordered),
    )


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def _interp(x: float, xs: tuple[float, ...], ys: tuple[float, ...]) -> float:
    """Piecewise-linear, held constant outside the measured range."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    for i in range(1, len(xs)):
        if x <= xs[i]:
            x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y1
    return ys[-1]
