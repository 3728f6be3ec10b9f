"""The step-time model fitted to Pollux's measurements, per application, with its error.

Every row of ``pollux/apps/<app>/{placements,scalability}.csv`` is one observation (nodes,
replicas, local batch, step, sync). :func:`calibrate` fits one :class:`StepTimeModel` per
application on all of them; :func:`held_out_errors` says how well it predicts shapes it has
not seen, with the split rule of the oracle's own calibration
(:func:`jigsaw.oracle.calibration_eval.fold_of_each_row`: whole configurations are held out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jigsaw.goodput.step_time import StepObservation, StepTimeModel, fit_step_times
from jigsaw.oracle.calibration import Measurement
from jigsaw.oracle.calibration_eval import fold_of_each_row


def observations_of(rows: Sequence[Measurement]) -> list[StepObservation]:
    """Measurements as observations; rows whose sync is not below their step (none in
    Pollux's files) say nothing about compute and are left out."""
    return [
        StepObservation(r.num_nodes, r.num_replicas, r.local_bsz, r.step_time, r.sync_time)
        for r in rows
        if 0 <= r.sync_time < r.step_time
    ]


def calibrate(rows: Sequence[Measurement]) -> StepTimeModel:
    return fit_step_times(observations_of(rows))


@dataclass(frozen=True, slots=True)
class StepTimeErrors:
    """Mean absolute percentage errors (fractions) of the synchronising step and of its
    compute part (step - sync), over ``rows`` observations."""

    rows: int
    step_mape: float
    compute_mape: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "rows": self.rows,
            "step_mape_pct": round(100 * self.step_mape, 2),
            "compute_mape_pct": round(100 * self.compute_mape, 2),
        }


def errors(model: StepTimeModel, observations: Sequence[StepObservation]) -> StepTimeErrors:
    step, compute = _predictions(model, observations)
    return _errors(observations, step, compute)


def held_out_errors(rows: Sequence[Measurement], folds: int = 5, seed: int = 0) -> StepTimeErrors:
    """Each row predicted by the fit on the folds that do not hold its configuration."""
    kept = [r for r in rows if 0 <= r.sync_time < r.step_time]
    observations = observations_of(kept)
    assignment = fold_of_each_row(kept, folds, seed)
    step = np.zeros(len(kept))
    compute = np.zeros(len(kept))
    for fold in range(folds):
        test = [i for i, f in enumerate(assignment) if f == fold]
        if not test:
            continue
        train = [observations[i] for i, f in enumerate(assignment) if f != fold]
        model = fit_step_times(train)
        predicted_step, predicted_compute = _predictions(model, [observations[i] for i in test])
        step[test] = predicted_step
        compute[test] = predicted_compute
    return _errors(observations, step, compute)


def _predictions(
    model: StepTimeModel, observations: Sequence[StepObservation]
) -> tuple[np.ndarray, np.ndarray]:
    nodes = np.array([o.nodes for o in observations])
    replicas = np.array([o.replicas for o in observations])
    atomic = np.array([o.atomic_bsz for o in observations], dtype=np.float64)
    return model.step_s(nodes, replicas, atomic), model.micro_batch_s(atomic)


def _errors(
    observations: Sequence[StepObservation], step: np.ndarray, compute: np.ndarray
) -> StepTimeErrors:
    measured_step = np.array([o.step_s for o in observations])
    measured_compute = measured_step - np.array([o.sync_s for o in observations])
    return StepTimeErrors(
        len(observations),
        float(np.mean(np.abs(step / measured_step - 1.0))),
        float(np.mean(np.abs(compute / measured_compute - 1.0))),
    )
