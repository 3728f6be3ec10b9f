"""Fit concurrent sharing on Gavel's measured pairs; validate leaving one job type out.

Reads Gavel's ``simulation_throughputs.json`` (steps/s of each job type alone, and of each
pair of job types sharing one GPU; ``$JIGSAW_SHARED_DIR/traces/gavel``) and, per GPU type
(v100, p100, k80), fits the linear model of :mod:`jigsaw.oracle.colocation_concurrent`: a
job's shared rate as a fraction of its solo rate, from the two jobs' sharing profiles (the
oracle's, for the zoo model each Gavel job type maps to) and their measured solo rates. Only
one-GPU job types (scale factor 1) are used: a pair's features are per worker.

Left out of the fit and of the validation:

- pairs with a 0 rate: they cannot share (memory); the policy refuses them by its memory
  check, as before (the count of those our memory estimate also refuses is printed);
- placeholder pairs: one of the two rates equals that job's solo rate to the last bit. A
  real measurement of two jobs on one GPU never reproduces the solo figure exactly; they sit
  almost all on v100 and in ResNet-18 rows. The whole pair is dropped (its other rate came from
  the same suspect run).

Validation: for each job type, fit on the pairs without it and predict its pairs (its own
rate and its partner's). Reports the median and p90 absolute error of the predicted fraction
per GPU type, beside two references: a constant (the training mean, same leave-one-out) and
a per-job-type lookup (each job's mean fraction over its pairs, in sample: what a model that
knows the job but not its partner reaches at best) and a lookup by job type and the
partner's zoo model (in sample: near the best any model of these features could reach).
A pair is predicted in both its job types' folds, so ``n`` counts it twice. Writes the fit
(all pairs) to ``jigsaw/data/colocation.json`` with ``--write``; prints one JSON object.

    .venv/bin/python -m bench.colocation_fit --write     # a few seconds
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.sim_common import ROOT, shared_traces
from jigsaw.model.hardware import preset
from jigsaw.model.profiles import canonical_name
from jigsaw.oracle import Oracle
from jigsaw.oracle.colocation_concurrent import (
    FEATURES,
    FLOOR,
    ConcurrentFit,
    fit_coefficients,
    pair_features,
)
from jigsaw.oracle.gang_timing import SharingProfile
from jigsaw.traces import GavelThroughputs

GPU_TYPES = ("v100", "p100", "k80")
OUT = ROOT / "jigsaw" / "data" / "colocation.json"

Row = tuple[str, str, float]
"""(job type, partner job type, shared rate / solo rate)."""


def job_profiles(oracle: Oracle, job_types: Sequence[str]) -> dict[str, SharingProfile]:
    found = {}
    for job_type in job_types:
        model, batch = canonical_name(job_type)
        profile = oracle.profiles.get(model)
        found[job_type] = oracle.sharing_profile(
            model, batch if batch is not None else profile.default_batch_size
        )
    return found


def measured_rows(
    table: GavelThroughputs, gpu: str
) -> tuple[list[Row], dict[str, float], dict[str, int], list[tuple[str, str]]]:
    """Rows kept, solo rates, counts of what was dropped, and the 0-rate pairs."""
    solo = {job: rate for (w, job, scale), rate in table.alone.items() if w == gpu and scale == 1}
    pairs = {
        (job, other): rates
        for (w, job, scale, other, other_scale), rates in table.paired.items()
        if w == gpu and scale == 1 and other_scale == 1
    }
    placeholder = {
        frozenset((job, other))
        for (job, other), (mine, theirs) in pairs.items()
        if mine == solo[job] or theirs == solo[other]
    }
    zero = {frozenset((job, other)) for (job, other), rates in pairs.items() if min(rates) <= 0}
    rows = [
        (job, other, mine / solo[job])
        for (job, other), (mine, _) in sorted(pairs.items())
        if frozenset((job, other)) not in placeholder | zero
    ]
    dropped = {
        "entries": len(pairs),
        "placeholder_pairs": len(placeholder),
        "placeholder_entries": sum(1 for (job, _), (mine, _) in pairs.items() if mine == solo[job]),
        "zero_rate_pairs": len(zero - placeholder),
    }
    zero_pairs = sorted((min(pair), max(pair)) for pair in zero - placeholder)
    return rows, solo, dropped, zero_pairs


def features_of(
    job: str, other: str, profiles: dict[str, SharingProfile], solo: dict[str, float], flops: float
) -> list[float]:
    return pair_features(profiles[job], 1.0 / solo[job], profiles[other], 1.0 / solo[other], flops)


def fitted(
    gpu: str, rows: list[Row], profiles: dict[str, SharingProfile], solo: dict[str, float]
) -> ConcurrentFit:
    """The fit on ``rows``, as the oracle will use it (clamped to the rows' feature range)."""
    flops = preset(gpu).rated_flops
    table = [(features_of(j, k, profiles, solo, flops), f) for j, k, f in rows]
    columns = list(zip(*(x for x, _ in table), strict=True))
    ranges = tuple((min(c), max(c)) for c in columns)
    return ConcurrentFit(gpu, tuple(fit_coefficients(table)), flops, ranges)


def predict(
    fit: ConcurrentFit,
    job: str,
    other: str,
    profiles: dict[str, SharingProfile],
    solo: dict[str, float],
) -> float:
    return fit.pair_fraction(profiles[job], 1.0 / solo[job], profiles[other], 1.0 / solo[other])


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)]


def summary(errors: Sequence[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(errors), 3),
        "p90": round(percentile(errors, 0.9), 3),
        "n": len(errors),
    }


def validate(
    gpu: str, rows: list[Row], profiles: dict[str, SharingProfile], solo: dict[str, float]
) -> dict[str, Any]:
    model_errors: list[float] = []
    constant_errors: list[float] = []
    for left in sorted(solo):
        train = [r for r in rows if left not in r[:2]]
        test = [r for r in rows if left in r[:2]]
        if not test or not train:
            continue
        fit = fitted(gpu, train, profiles, solo)
        mean = statistics.fmean(f for *_, f in train)
        for j, k, f in test:
            model_errors.append(abs(predict(fit, j, k, profiles, solo) - f))
            constant_errors.append(abs(mean - f))
    by_job: dict[str, list[float]] = {}
    for j, _, f in rows:
        by_job.setdefault(j, []).append(f)
    lookup_errors = [abs(statistics.fmean(by_job[j]) - f) for j, _, f in rows]
    by_family: dict[tuple[str, str], list[float]] = {}
    for j, k, f in rows:
        by_family.setdefault((j, canonical_name(k)[0]), []).append(f)
    family_errors = [
        abs(statistics.fmean(by_family[(j, canonical_name(k)[0])]) - f) for j, k, f in rows
    ]
    return {
        "model_leave_one_job_type_out": summary(model_errors),
        "constant_leave_one_job_type_out": summary(constant_errors),
        "per_job_type_lookup_in_sample": summary(lookup_errors),
        "per_job_type_and_partner_model_lookup_in_sample": summary(family_errors),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--throughputs", type=Path, default=None)
    parser.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    args = parser.parse_args()
    path = args.throughputs or shared_traces() / "gavel" / "simulation_throughputs.json"
    started = time.perf_counter()
    table = GavelThroughputs.load(path)
    if table.sharing != "concurrent":
        raise SystemExit(
            f"{path}: its pairs were measured {table.sharing!r}; the fit needs concurrent"
        )
    fits: dict[str, Any] = {}
    report: dict[str, Any] = {}
    for gpu in GPU_TYPES:
        hardware = preset(gpu)
        oracle = Oracle(hardware)
        rows, solo, dropped, zero_pairs = measured_rows(table, gpu)
        profiles = job_profiles(oracle, sorted(solo))
        fit = fitted(gpu, rows, profiles, solo)
        refused = sum(
            1 for a, b in zero_pairs if profiles[a].memory_share + profiles[b].memory_share > 1.0
        )
        fractions = [f for *_, f in rows]
        fits[gpu] = {
            "coefficients": list(fit.coefficients),
            "feature_range": [list(pair) for pair in fit.feature_range],
            "pairs_used": len(rows),
            "job_types": len(solo),
        }
        report[gpu] = {
            **dropped,
            "rows_used": len(rows),
            "zero_rate_pairs_over_memory_by_our_estimate": refused,
            "median_fraction": round(statistics.median(fractions), 3),
            "fraction_p10_p90": [
                round(percentile(fractions, 0.1), 3),
                round(percentile(fractions, 0.9), 3),
            ],
            **validate(gpu, rows, profiles, solo),
        }
    result = {
        "bench": "colocation_fit",
        "source": str(path),
        "features": list(FEATURES),
        "per_gpu_type": report,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    if args.write:
        OUT.write_text(
            json.dumps(
                {
                    "provenance": (
                        "bench/colocation_fit.py on Gavel's simulation_throughputs.json "
                        "(stanford-futuredata/gavel, MIT, commit "
                        "c4fa40097339e9608ab71fd64c8bdea96a5e4a4c); one-GPU job types, "
                        "0-rate and placeholder pairs left out"
                    ),
                    "features": list(FEATURES),
                    "floor": FLOOR,
                    "gpu_types": fits,
                },
                indent=1,
            )
            + "\n"
        )
        result["wrote"] = str(OUT.relative_to(ROOT))
    print(json.dumps(result, indent=1))
    if any(not math.isfinite(c) for fit in fits.values() for c in fit["coefficients"]):
        raise SystemExit("the fit is not finite")


if __name__ == "__main__":
    main()
