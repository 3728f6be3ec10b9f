"""Readers for Gavel: the 10-column ``.trace`` files and ``simulation_throughputs.json``.

A trace line is ``job_type, command, working_directory, num_steps_arg, needs_data_dir,
total_steps, scale_factor, priority_weight, SLO, arrival_time`` (tab separated). The job type
(``"ResNet-50 (batch size 64)"``) maps to a zoo model and batch via
``jigsaw.profiles.canonical_name``; Gavel's batch sizes are per worker.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from jigsaw.errors import InvalidSpecError, TraceFormatError
from jigsaw.profiles import analytic_profile, canonical_name
from jigsaw.traces.record import TraceJob, parse_non_negative_float, parse_positive_int

NUM_FIELDS = 10
_KEY = re.compile(r"^\('(?P<job_type>[^']+)',\s*(?P<scale>\d+)\)$")


def read_gavel(path: str | Path) -> list[TraceJob]:
    label = str(path)
    jobs = []
    with Path(path).open() as handle:
        for line, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            fields = text.rstrip("\n").split("\t")
            if len(fields) != NUM_FIELDS:
                raise TraceFormatError(
                    label, line, f"expected {NUM_FIELDS} tab-separated fields, found {len(fields)}"
                )
            job_type = fields[0].strip()
            model, batch = canonical_name(job_type)
            try:
                profile = analytic_profile(model)
            except InvalidSpecError:
                raise TraceFormatError(
                    label, line, f"unknown Gavel job type {job_type!r}"
                ) from None
            priority = parse_non_negative_float(fields[7], "priority_weight", label, line)
            if priority <= 0:
                raise TraceFormatError(label, line, "priority_weight must be > 0")
            jobs.append(
                TraceJob(
                    id=f"gavel-{line:06d}",
                    submit_time_s=parse_non_negative_float(fields[9], "arrival_time", label, line),
                    num_workers=parse_positive_int(fields[6], "scale_factor", label, line),
                    model=model,
                    batch_size=batch if batch is not None else profile.default_batch_size,
                    iterations=parse_positive_int(fields[5], "total_steps", label, line),
                    priority=priority,
                    original_model=job_type,
                    source=f"{label}:{line}",
                )
            )
    jobs.sort(key=lambda job: job.submit_time_s)
    return jobs


@dataclass(frozen=True, slots=True)
class GavelThroughputs:
    """Steps per second by (worker type, job type, scale factor), alone or paired."""

    alone: dict[tuple[str, str, int], float]
    paired: dict[tuple[str, str, int, str, int], tuple[float, float]]

    @classmethod
    def load(cls, path: str | Path) -> GavelThroughputs:
        label = str(path)
        try:
            data = json.loads(Path(path).read_text())
        except json.JSONDecodeError as error:
            raise TraceFormatError(label, error.lineno, f"not valid JSON: {error.msg}") from None
        if not isinstance(data, dict):
            raise TraceFormatError(label, 1, "expected {worker_type: {job key: {...}}}")
        alone: dict[tuple[str, str, int], float] = {}
        paired: dict[tuple[str, str, int, str, int], tuple[float, float]] = {}
        for worker, entries in data.items():
            if not isinstance(entries, dict):
                raise TraceFormatError(label, 1, f"{worker}: expected an object of job keys")
            for key, rates in entries.items():
                job_type, scale = _parse_key(key, label, worker)
                if not isinstance(rates, dict) or "null" not in rates:
                    raise TraceFormatError(label, 1, f"{worker} {key}: no 'null' (alone) rate")
                alone[(worker, job_type, scale)] = float(rates["null"])
                for other, pair in rates.items():
                    if other == "null":
                        continue
                    other_type, other_scale = _parse_key(other, label, worker)
                    if not isinstance(pair, list) or len(pair) != 2:
                        raise TraceFormatError(label, 1, f"{worker} {key} {other}: need 2 rates")
                    paired[(worker, job_type, scale, other_type, other_scale)] = (
                        float(pair[0]),
                        float(pair[1]),
                    )
        return cls(alone, paired)

    def steps_per_second(self, worker_type: str, job_type: str, scale_factor: int) -> float:
        try:
            return self.alone[(worker_type, job_type, scale_factor)]
        except KeyError:
            raise InvalidSpecError(
                f"no Gavel throughput for {job_type!r} x{scale_factor} on {worker_type!r}"
            ) from None

    def paired_steps_per_second(
        self, worker_type: str, job: tuple[str, int], other: tuple[str, int]
    ) -> tuple[float, float]:
        """Rates of ``job`` and ``other`` when they share the GPUs (space sharing)."""
        key = (worker_type, job[0], job[1], other[0], other[1])
        try:
            return self.paired[key]
        except KeyError:
            raise InvalidSpecError(f"no Gavel pair throughput for {key}") from None

    def worker_types(self) -> tuple[str, ...]:
        return tuple(sorted({key[0] for key in self.alone}))


def _parse_key(key: str, label: str, worker: str) -> tuple[str, int]:
    match = _KEY.match(key.strip())
    if match is None:
        raise TraceFormatError(label, 1, f"{worker}: malformed job key {key!r}")
    return match.group("job_type"), int(match.group("scale"))
