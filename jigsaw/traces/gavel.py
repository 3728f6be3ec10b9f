"""Readers for Gavel: the 10-column ``.trace`` files and ``simulation_throughputs.json``.

A trace line is ``job_type, command, working_directory, num_steps_arg, needs_data_dir,
total_steps, scale_factor, priority_weight, SLO, arrival_time`` (tab separated). The job type
(``"ResNet-50 (batch size 64)"``) maps to a zoo model and batch via
``jigsaw.model.profiles.canonical_name``; Gavel's batch sizes are per worker.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from jigsaw.model.environment import SHARING_MODES
from jigsaw.model.errors import InvalidSpecError, TraceFormatError
from jigsaw.model.profiles import analytic_profile, canonical_name
from jigsaw.traces.record import TraceJob, parse_non_negative_float, parse_positive_int

NUM_FIELDS = 10
SHARING_KEY = "sharing"
SHARING_KEY_DEFAULT = "concurrent"
"""Gavel measured its pairs running at the same time on one GPU (space sharing)."""
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
    """Steps per second by (worker type, job type, scale factor), alone or paired.

    The file is ``{worker_type: {job key: {"null": alone, other job key: [rate, other's
    rate], ...}}}`` with job keys ``"('<job type>', <scale factor>)"``, and may say at its
    top level how its pairs shared the GPU: ``"sharing": "concurrent"`` (Gavel's measurements,
    the default when absent) or ``"timeslice"``. Every rate must be a finite number >= 0 (0:
    the job cannot run there, or the pair cannot share); every job type must map to a zoo
    model (``jigsaw.model.profiles.canonical_name``), and a pair must name a job with its own entry
    on the same worker type. A bad entry raises :class:`TraceFormatError` naming the file, the
    line of the entry, its keys and what is wrong.
    """

    alone: dict[tuple[str, str, int], float]
    paired: dict[tuple[str, str, int, str, int], tuple[float, float]]
    sharing: str = SHARING_KEY_DEFAULT
    """How the measured pairs shared the GPU."""

    @classmethod
    def load(cls, path: str | Path) -> GavelThroughputs:
        label = str(path)
        text = Path(path).read_text()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise TraceFormatError(label, error.lineno, f"not valid JSON: {error.msg}") from None
        if not isinstance(data, dict):
            raise TraceFormatError(label, 1, "expected {worker_type: {job key: {...}}}")
        where = _Locator(label, text)
        sharing = data.pop(SHARING_KEY, SHARING_KEY_DEFAULT)
        if sharing not in SHARING_MODES:
            raise where.error(
                (SHARING_KEY,),
                f"unknown sharing mode {sharing!r}; choose one of: {', '.join(SHARING_MODES)}",
            )
        alone: dict[tuple[str, str, int], float] = {}
        paired: dict[tuple[str, str, int, str, int], tuple[float, float]] = {}
        for worker, entries in data.items():
            if not isinstance(entries, dict):
                raise where.error((worker,), "expected an object of job keys")
            for key, rates in entries.items():
                job_type, scale = _parse_key(key, where, (worker, key))
                if not isinstance(rates, dict) or "null" not in rates:
                    raise where.error((worker, key), "no 'null' (alone) rate")
                alone[(worker, job_type, scale)] = _rate(rates["null"], where, (worker, key))
                for other, pair in rates.items():
                    if other == "null":
                        continue
                    keys = (worker, key, other)
                    other_type, other_scale = _parse_key(other, where, keys)
                    if other not in entries:
                        raise where.error(
                            keys,
                            f"the pair names job type {other_type!r} x{other_scale}, which has "
                            f"no entry of its own on {worker!r}",
                        )
                    if not isinstance(pair, list) or len(pair) != 2:
                        raise where.error(keys, "need a list of 2 rates [this job, the other]")
                    paired[(worker, job_type, scale, other_type, other_scale)] = (
                        _rate(pair[0], where, keys),
                        _rate(pair[1], where, keys),
                    )
        return cls(alone, paired, sharing)

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


def _parse_key(key: str, where: _Locator, keys: tuple[str, ...]) -> tuple[str, int]:
    match = _KEY.match(key.strip())
    if match is None:
        raise where.error(keys, f"malformed job key {key!r}; expected \"('<job type>', <GPUs>)\"")
    job_type = match.group("job_type")
    try:
        analytic_profile(canonical_name(job_type)[0])
    except InvalidSpecError:
        raise where.error(keys, f"unknown Gavel job type {job_type!r}") from None
    return job_type, int(match.group("scale"))


def _rate(value: object, where: _Locator, keys: tuple[str, ...]) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise where.error(keys, f"a rate must be a number of steps per second, got {value!r}")
    rate = float(value)
    if not math.isfinite(rate):
        raise where.error(keys, f"a rate must be finite, got {value!r}")
    if rate < 0:
        raise where.error(keys, f"a rate must be >= 0 steps per second, got {value!r}")
    return rate


class _Locator:
    """Errors naming the file, the line where an entry's keys appear, and the keys."""

    def __init__(self, label: str, text: str) -> None:
        self.label = label
        self.text = text

    def error(self, keys: tuple[str, ...], message: str) -> TraceFormatError:
        position = 0
        for key in keys:
            found = self.text.find(json.dumps(key), position)
            if found < 0:
                break
            position = found
        line = self.text.count("\n", 0, position) + 1
        path = " -> ".join(repr(key) for key in keys)
        return TraceFormatError(self.label, line, f"{path}: {message}")
