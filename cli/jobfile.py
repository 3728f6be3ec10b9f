"""Read a job spec from a YAML or JSON file (``-f FILE``, ``-f -`` for stdin)."""

from __future__ import annotations

import datetime
import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cli.errors import UsageError
from cli.unique_keys import RepeatedKey, load_json, load_yaml
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import PlanRequest

REQUIRED_FIELDS = ("name", "model", "workers", "iterations")
INTEGER_FIELDS = frozenset(
    {
        "workers",
        "iterations",
        "priority",
        "batch_size",
        "seed",
        "min_workers",
        "max_workers",
        "min_global_batch",
        "max_global_batch",
    }
)
NUMBER_FIELDS = frozenset({"learning_rate"})


@dataclass(frozen=True)
class JobFile:
    """A job file's fields and the line each is on, so that a field the server refuses is
    named where the user wrote it."""

    path: str
    values: dict[str, Any]
    lines: Mapping[str, int]

    def where(self, key: str) -> str:
        """``job.yaml:5``, or the path alone when the key's line is unknown."""
        name = "(stdin)" if self.path == "-" else self.path
        line = self.lines.get(key)
        return f"{name}:{line}" if line is not None else name


def read_job_file(path: str) -> dict[str, Any]:
    """The mapping in ``path`` (see :func:`load_job_file`)."""
    return load_job_file(path).values


def load_job_file(path: str) -> JobFile:
    """The mapping in ``path``. YAML is a superset of JSON, but JSON errors read better as JSON.
    A key given twice is refused (both parsers would keep the last value)."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"cannot read job file {path}: {error.strerror or error}") from error
    except UnicodeDecodeError as error:
        raise UsageError(
            f"job file {path} is not UTF-8 (byte {error.start}); save it as UTF-8"
        ) from error
    try:
        data = load_json(text) if path.endswith(".json") else load_yaml(text)
    except RepeatedKey as repeat:
        raise UsageError(f"job file {path}:{repeat.line}: {repeat}") from repeat
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise UsageError(_syntax_error(path, error)) from error
    if data is None:
        raise UsageError(f"job file {path} is empty")
    if not isinstance(data, Mapping):
        raise UsageError(f"job file {path} must hold a mapping of spec fields (name: ..., ...)")
    job_file = JobFile(path, {str(key): value for key, value in data.items()}, _key_lines(text))
    for key, value in job_file.values.items():
        problem = _value_problem(value) or _type_problem(
            key, value, yaml_file=not path.endswith(".json")
        )
        if problem is not None:
            raise UsageError(f"job file {job_file.where(key)}: field {key!r} {problem}")
    return job_file


def _syntax_error(path: str, error: json.JSONDecodeError | yaml.YAMLError) -> str:
    """``job file job.yaml:3: not valid YAML: mapping values are not allowed here (column
    9)``: the line, as every other job-file error gives it."""
    name = "(stdin)" if path == "-" else path
    if isinstance(error, json.JSONDecodeError):
        return f"job file {name}:{error.lineno}: not valid JSON: {error.msg} (column {error.colno})"
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None)
    if mark is not None and problem:
        return (
            f"job file {name}:{mark.line + 1}: not valid {_kind(path)}: {problem} "
            f"(column {mark.column + 1})"
        )
    first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
    return f"job file {name} is not valid {_kind(path)}: {first_line}"


def _value_problem(value: Any, inside: tuple[int, ...] = ()) -> str | None:
    """Why a YAML value cannot go into a JSON spec (None: it can). ``inside``: the ids of
    the lists that hold ``value`` (a YAML alias can make a list hold itself)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if isinstance(value, list):
        if id(value) in inside:
            return "holds itself (a YAML alias inside its own anchor); write the values out"
        for item in value:
            problem = _value_problem(item, (*inside, id(value)))
            if problem is not None:
                return problem
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return None
    kind = {bytes: "binary data", datetime.date: "a date", datetime.datetime: "a date and time"}
    found = kind.get(type(value), type(value).__name__)
    return f"must be a string, number or list, got {found} ({value!r:.40}); quote it"


def _type_problem(key: str, value: Any, *, yaml_file: bool) -> str | None:
    """A numeric field holding text. YAML 1.1 reads ``1e3`` and ``1e-3`` as text (its floats
    need a dot: ``1.0e3``), so such a value is named here, with its line, instead of being
    refused by the server without one."""
    if key not in INTEGER_FIELDS | NUMBER_FIELDS or not isinstance(value, str):
        return None
    kind = "an integer" if key in INTEGER_FIELDS else "a number"
    try:
        number = float(value)
    except ValueError:
        return f"must be {kind}, got the text {value!r}"
    whole = key in INTEGER_FIELDS and number.is_integer() and abs(number) < 2**63
    written = str(int(number)) if whole else repr(number)
    if yaml_file and "e" in value.lower() and "." not in value:
        why = "YAML reads a number with an exponent but no dot, such as 1e3, as text"
    else:
        why = "it is quoted"
    return f"must be {kind}, got the text {value!r} ({why}): write {written}"


def _key_lines(text: str) -> dict[str, int]:
    """The 1-based line of each top-level key (JSON reads as YAML here; none if it cannot)."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return {}
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(key.value): int(key.start_mark.line) + 1 for key, _value in node.value}


def resolve_spec(
    file_values: Mapping[str, Any], flags: Mapping[str, Any], file: str | None = None
) -> dict[str, Any]:
    """File values overridden by any flag that was given; plans given as lists become strings.
    ``file``: the job file's path, when one was given (a missing field names it)."""
    spec = dict(file_values)
    spec.update({key: value for key, value in flags.items() if value is not None})
    for key, value in flags.items():
        if isinstance(value, float) and not math.isfinite(value):
            flag = "--" + key.replace("_", "-")
            raise UsageError(f"{flag} must be a finite number, got {value}")
    if isinstance(spec.get("spb"), list):
        spec["spb"] = plan_text(spec["spb"])
    missing = [name for name in REQUIRED_FIELDS if name not in spec]
    if missing:
        flags_text = ", ".join(f"--{name}" for name in missing)
        if file is None:
            raise UsageError(
                f"missing {flags_text} (give the flag or put it in a job file with -f)"
            )
        fields = ", ".join(f"{name}:" for name in missing)
        where = "the job file on stdin" if file == "-" else file
        raise UsageError(f"missing {flags_text}: give the flag or add {fields} to {where}")
    return spec


def _kind(path: str) -> str:
    return "JSON" if path.endswith(".json") else "YAML"


def plan_text(depths: list[Any]) -> Any:
    """A YAML list of depths in the API's spelling; anything else is left for the API to
    refuse with a message naming ``spb``."""
    try:
        return PlanRequest.parse(depths).text
    except InvalidSpecError:
        return depths
