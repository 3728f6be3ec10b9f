"""eta(plan, progress) for Pollux's six applications, from their validation curves.

Pollux's ``validation-<B>.csv`` (:mod:`jigsaw.traces.pollux_curves`) give the whole model's
``grad_sqr`` and ``grad_var`` over training. The eta model (:mod:`jigsaw.efficiency.model`)
needs them per
block, so each is split with the block's share measured on the application's zoo stand-in
(``jigsaw/data/block_noise_ratios.json``, made by ``bench/spb_block_ratios.py``); the split is
taken as constant over training (docs/SPB.md, "eta over training in the simulator").

At progress ``f`` (fraction of the application's training, 0..1) and a job of ``N`` workers of
per-worker batch ``B``: the curve is read at the job's global batch ``N B`` (clamped to the
measured range), at the epoch that holds ``f``; block ``b`` gets
``grad_sqr * sqr_share[b]`` and ``grad_var * var_share[b]`` (variance at the curve's base
batch, rescaled to ``B`` by :func:`jigsaw.efficiency.model.eta_for_plan`); eta is the module
formula with
source ``curve``. A plan for a model cut into another number of blocks than the stand-in
gets the shares re-cut by depth (:meth:`BlockShares.resampled`). :meth:`CurveEta.mean_eta` is
the harmonic mean of eta over a stretch of progress: the constant rate that covers that
stretch in the same time.

Pure: no torch, no I/O beyond reading the two data sources.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jigsaw.efficiency.model import CURVE, BlockNoise, eta_for_plan
from jigsaw.efficiency.table import EtaEstimate
from jigsaw.model.errors import TraceFormatError
from jigsaw.model.plan import SPBPlan
from jigsaw.traces.pollux_curves import AppCurves, load_app_curves

RATIOS_FILE = Path(__file__).resolve().parent.parent / "data" / "block_noise_ratios.json"
APPS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")


@dataclass(frozen=True, slots=True)
class BlockShares:
    """One application's per-block shares of the whole model's grad_sqr and grad_var."""

    app: str
    model: str
    grad_sqr: tuple[float, ...]
    grad_var: tuple[float, ...]

    @property
    def num_blocks(self) -> int:
        return len(self.grad_sqr)

    def resampled(self, blocks: int) -> BlockShares:
        """The shares for a model cut into ``blocks`` blocks instead: each measured share is
        spread evenly over its stretch of depth (block ``b`` of ``K`` covers
        ``[(b-1)/K, b/K]``) and the stretch is re-cut into ``blocks`` equal pieces."""
        if blocks == self.num_blocks:
            return self
        return BlockShares(
            self.app, self.model, _rebin(self.grad_sqr, blocks), _rebin(self.grad_var, blocks)
        )


def _rebin(shares: tuple[float, ...], blocks: int) -> tuple[float, ...]:
    k = len(shares)
    out = []
    for b in range(blocks):
        lo, hi = b / blocks, (b + 1) / blocks
        out.append(
            sum(
                share * max(0.0, min(hi, (i + 1) / k) - max(lo, i / k)) * k
                for i, share in enumerate(shares)
            )
        )
    return tuple(out)


def read_block_shares(path: str | Path = RATIOS_FILE) -> dict[str, BlockShares]:
    """The ratio file; a missing or bad field names the file and the field."""
    label = str(path)
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise TraceFormatError(label, 0, f"cannot read the block ratio file: {error}") from None
    apps = document.get("apps") if isinstance(document, dict) else None
    if not isinstance(apps, dict):
        raise TraceFormatError(
            label, 0, "field 'apps' must be an object of application -> {model, grad_sqr, grad_var}"
        )
    shares: dict[str, BlockShares] = {}
    for app, entry in sorted(apps.items()):
        where = f"apps.{app}"
        if not isinstance(entry, dict):
            raise TraceFormatError(label, 0, f"field '{where}' must be an object")
        model = entry.get("model")
        if not isinstance(model, str) or not model:
            raise TraceFormatError(label, 0, f"field '{where}.model' must be a model name")
        sqr = _shares(entry.get("grad_sqr"), f"{where}.grad_sqr", label)
        var = _shares(entry.get("grad_var"), f"{where}.grad_var", label)
        if len(sqr) != len(var):
            raise TraceFormatError(
                label,
                0,
                f"fields '{where}.grad_sqr' and '{where}.grad_var' "
                f"must have one share per block ({len(sqr)} vs {len(var)})",
            )
        shares[app] = BlockShares(app, model, sqr, var)
    return shares


def _shares(value: object, field: str, label: str) -> tuple[float, ...]:
    if not isinstance(value, list) or not value:
        raise TraceFormatError(label, 0, f"field '{field}' must be a non-empty list of shares")
    out: list[float] = []
    for index, item in enumerate(value):
        if (
            isinstance(item, bool)
            or not isinstance(item, int | float)
            or not math.isfinite(item)
            or item < 0
        ):
            raise TraceFormatError(
                label, 0, f"field '{field}[{index}]' must be a finite number >= 0, got {item!r}"
            )
        out.append(float(item))
    if abs(sum(out) - 1.0) > 1e-3:
        raise TraceFormatError(label, 0, f"field '{field}' must sum to 1, sums to {sum(out):.4f}")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _Segment:
    start: float
    end: float
    grad_sqr: float
    grad_var: float


class CurveEta:
    """eta(plan, progress) of each application from its curves and block shares."""

    def __init__(self, curves: Mapping[str, AppCurves], shares: Mapping[str, BlockShares]) -> None:
        missing = sorted(set(curves) - set(shares))
        if missing:
            raise ValueError(f"no block shares for application(s) {', '.join(missing)}")
        self.curves = dict(curves)
        self.shares = dict(shares)
        self._segments: dict[tuple[str, float], tuple[_Segment, ...]] = {}
        self._etas: dict[tuple[str, tuple[int, ...], int], tuple[float, ...]] = {}

    @classmethod
    def load(
        cls, apps_dir: str | Path, apps: Sequence[str] = APPS, ratios: str | Path = RATIOS_FILE
    ) -> CurveEta:
        directory = Path(apps_dir)
        return cls(
            {app: load_app_curves(directory / app) for app in apps}, read_block_shares(ratios)
        )

    def num_blocks(self, app: str) -> int:
        return self._shares_of(app).num_blocks

    def eta(self, app: str, plan: SPBPlan, progress: float, batch: int) -> EtaEstimate:
        """eta of ``plan`` (per-worker batch ``batch``) at ``progress`` in [0, 1]."""
        segments = self._curve(app, plan.num_workers * batch)
        index = _segment_at(segments, min(1.0, max(0.0, progress)))
        return self._eta_of(app, plan, batch, segments, index)

    def mean_eta(
        self, app: str, plan: SPBPlan, batch: int, start: float, end: float = 1.0
    ) -> float:
        """Harmonic mean of eta over progress [start, end]: the constant eta that covers that
        stretch in the same number of iterations."""
        if plan.is_full_backprop:
            return 1.0
        lo, hi = min(1.0, max(0.0, start)), min(1.0, max(0.0, end))
        segments = self._curve(app, plan.num_workers * batch)
        etas = self._etas_for(app, plan, batch, segments)
        if hi <= lo:
            return etas[_segment_at(segments, lo)]
        inverse = 0.0
        for segment, eta in zip(segments, etas, strict=True):
            span = min(hi, segment.end) - max(lo, segment.start)
            if span > 0:
                inverse += span / eta
        return (hi - lo) / inverse if inverse > 0 else 1.0

    # -- internals -------------------------------------------------------------------------
    def _shares_of(self, app: str) -> BlockShares:
        try:
            return self.shares[app]
        except KeyError:
            raise ValueError(
                f"{app!r} is not a Pollux application with curves; choose one "
                f"of: {', '.join(sorted(self.curves))}"
            ) from None

    def _curve(self, app: str, global_batch: float) -> tuple[_Segment, ...]:
        curves = self.curves.get(app)
        if curves is None:
            self._shares_of(app)
            raise ValueError(f"no validation curves loaded for {app!r}")
        batch = min(
            float(curves.max_batch_size), max(float(curves.init_batch_size), float(global_batch))
        )
        key = (app, batch)
        cached = self._segments.get(key)
        if cached is None:
            points = curves.noise_curve(batch)
            total = points[-1][0] or 1.0
            segments, start = [], 0.0
            for end, sqr, var in points:
                segments.append(_Segment(start / total, end / total, sqr, var))
                start = end
            cached = self._segments[key] = tuple(segments)
        return cached

    def _etas_for(
        self, app: str, plan: SPBPlan, batch: int, segments: tuple[_Segment, ...]
    ) -> tuple[float, ...]:
        key = (app, plan.depths, batch)
        cached = self._etas.get(key)
        if cached is None:
            cached = self._etas[key] = tuple(
                self._eta_of(app, plan, batch, segments, i).eta for i in range(len(segments))
            )
        return cached

    def _eta_of(
        self, app: str, plan: SPBPlan, batch: int, segments: tuple[_Segment, ...], index: int
    ) -> EtaEstimate:
        stats = self._stats(app, plan.num_blocks, plan.num_workers, segments[index], 1, 0)
        return eta_for_plan(stats, plan, batch=batch, source=CURVE)

    def segment_index(self, app: str, workers: int, batch: int, progress: float) -> int:
        """Which stretch of the curve (an epoch of the application's training) holds
        ``progress``: the statistics change only when this does."""
        return _segment_at(self._curve(app, workers * batch), min(1.0, max(0.0, progress)))

    def block_noise(
        self,
        app: str,
        num_blocks: int,
        workers: int,
        batch: int,
        progress: float,
        *,
        iteration: int,
        observations: int,
    ) -> tuple[BlockNoise, ...]:
        """The per-block statistics a job of ``workers`` x ``batch`` at ``progress`` would
        report, as if its workers had measured them (``observations`` smoothed iterations,
        the newest at ``iteration``): what the simulator feeds the policy, so that it prices
        plans with the eta the gangs then progress at."""
        segments = self._curve(app, workers * batch)
        segment = segments[_segment_at(segments, min(1.0, max(0.0, progress)))]
        return self._stats(app, num_blocks, workers, segment, observations, iteration)

    def _stats(
        self,
        app: str,
        num_blocks: int,
        workers: int,
        segment: _Segment,
        observations: int,
        iteration: int,
    ) -> tuple[BlockNoise, ...]:
        shares = self._shares_of(app).resampled(num_blocks)
        base = self.curves[app].init_batch_size
        return tuple(
            BlockNoise(
                block=b + 1,
                grad_sqr=segment.grad_sqr * sqr,
                grad_var=segment.grad_var * var,
                batch=base,
                observations=observations,
                last_iteration=iteration,
                contributors=workers,
            )
            for b, (sqr, var) in enumerate(zip(shares.grad_sqr, shares.grad_var, strict=True))
        )


def _segment_at(segments: tuple[_Segment, ...], progress: float) -> int:
    for index, segment in enumerate(segments):
        if progress < segment.end:
            return index
    return len(segments) - 1
