"""Reader for our own job lists (JSON or YAML). Schema (docs/ORACLE.md, "Job lists"):

    jobs:                       # or a bare list
      - name: resnet-a          # required, unique
        model: resnet50_224     # required: zoo model, Pollux app or Gavel job type
        workers: 4              # required, >= 1
        iterations: 10000       # required unless duration_s is given
        duration_s: 3600        # optional
        submit_time: 0          # seconds from trace start, default 0
        priority: 1             # default 1
        batch_size: 32          # local batch; default: the model's default
        spb: staircase          # plan spec (none, staircase, uniform:k, auto, "0,1,2,3")
        parallelism: auto       # auto | data | pipeline | hybrid; default data
        user: alice             # optional

Errors name the file and the job entry number (``line`` is the 1-based entry number).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from jigsaw.model.errors import InvalidSpecError, TraceFormatError
from jigsaw.model.numerics import ROUNDOFF
from jigsaw.model.parallelism import PARALLELISM_CHOICES
from jigsaw.model.plan import PlanRequest
from jigsaw.model.profiles import analytic_profile, canonical_name
from jigsaw.traces.record import TraceJob

KNOWN_FIELDS = frozenset(
    {
        "name",
        "model",
        "workers",
        "iterations",
        "duration_s",
        "submit_time",
        "priority",
        "batch_size",
        "spb",
        "user",
        "parallelism",
    }
)


def read_joblist(path: str | Path) -> list[TraceJob]:
    label = str(path)
    text = Path(path).read_text()
    try:
        data: Any = json.loads(text) if label.endswith(".json") else yaml.safe_load(text)
    except json.JSONDecodeError as error:
        raise TraceFormatError(label, error.lineno, f"not valid JSON: {error.msg}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 0
        raise TraceFormatError(label, line, f"not valid YAML: {error}") from None
    entries = data.get("jobs") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise TraceFormatError(label, 1, "expected a list of jobs or an object with 'jobs'")
    jobs = []
    seen: set[str] = set()
    for number, raw in enumerate(entries, start=1):
        job = _parse_job(raw, label, number)
        if job.id in seen:
            raise TraceFormatError(label, number, f"job name {job.id!r} is used twice")
        seen.add(job.id)
        jobs.append(job)
    jobs.sort(key=lambda job: job.submit_time_s)
    return jobs


def _parse_job(raw: Any, label: str, number: int) -> TraceJob:
    def fail(message: str) -> TraceFormatError:
        return TraceFormatError(label, number, f"job entry {number}: {message}")

    if not isinstance(raw, dict):
        raise fail("must be a mapping")
    unknown = set(raw) - KNOWN_FIELDS
    if unknown:
        raise fail(f"unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    for required in ("name", "model", "workers"):
        if required not in raw:
            raise fail(f"missing required field {required!r}")
    if "iterations" not in raw and "duration_s" not in raw:
        raise fail("needs 'iterations' (or 'duration_s')")
    model, embedded_batch = canonical_name(str(raw["model"]))
    try:
        default_batch = analytic_profile(model).default_batch_size
    except InvalidSpecError:
        default_batch = 32  # a measured-only model: the caller's catalog decides
    spb = raw.get("spb")
    if spb is not None:
        spb = ",".join(str(d) for d in spb) if isinstance(spb, list) else str(spb)
        try:
            PlanRequest.parse(spb)
        except InvalidSpecError as error:
            raise fail(str(error)) from None
    parallelism = raw.get("parallelism")
    if parallelism is not None and parallelism not in PARALLELISM_CHOICES:
        raise fail(
            f"parallelism must be one of {', '.join(PARALLELISM_CHOICES)}, got {parallelism!r}"
        )
    return TraceJob(
        id=str(raw["name"]),
        submit_time_s=_number(raw.get("submit_time", 0), "submit_time", fail, minimum=0.0),
        num_workers=_integer(raw["workers"], "workers", fail),
        model=str(raw["model"]),
        batch_size=_integer(
            raw.get("batch_size", embedded_batch or default_batch), "batch_size", fail
        ),
        duration_s=(
            None
            if raw.get("duration_s") is None
            else _number(raw["duration_s"], "duration_s", fail, minimum=0.0)
        ),
        iterations=(
            None
            if raw.get("iterations") is None
            else _integer(raw["iterations"], "iterations", fail)
        ),
        priority=_number(raw.get("priority", 1), "priority", fail, minimum=ROUNDOFF),
        user=None if raw.get("user") is None else str(raw["user"]),
        spb=spb,
        parallelism=parallelism,
        original_model=str(raw["model"]),
        source=f"{label}:job {number}",
    )


def _integer(value: Any, what: str, fail: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail(f"{what} must be an integer >= 1, got {value!r}")
    return int(value)


def _number(value: Any, what: str, fail: Any, *, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise fail(f"{what} must be a number >= {minimum:g}, got {value!r}")
    return float(value)
