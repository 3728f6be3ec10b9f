"""Read a job spec from a YAML or JSON file (``-f FILE``, ``-f -`` for stdin)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from cli.errors import UsageError
from jigsaw.errors import InvalidSpecError
from jigsaw.plan import PlanRequest

REQUIRED_FIELDS = ("name", "model", "workers", "iterations")


def read_job_file(path: str) -> dict[str, Any]:
    """The mapping in ``path``. YAML is a superset of JSON, but JSON errors read better as JSON."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise UsageError(f"cannot read job file {path}: {error.strerror or error}") from error
    try:
        data = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UsageError(f"job file {path} is not valid {_kind(path)}: {first_line}") from error
    if data is None:
        raise UsageError(f"job file {path} is empty")
    if not isinstance(data, Mapping):
        raise UsageError(f"job file {path} must hold a mapping of spec fields (name: ..., ...)")
    return {str(key): value for key, value in data.items()}


def resolve_spec(file_values: Mapping[str, Any], flags: Mapping[str, Any]) -> dict[str, Any]:
    """File values overridden by any flag that was given; plans given as lists become strings."""
    spec = dict(file_values)
    spec.update({key: value for key, value in flags.items() if value is not None})
    if isinstance(spec.get("spb"), list):
        spec["spb"] = plan_text(spec["spb"])
    missing = [name for name in REQUIRED_FIELDS if name not in spec]
    if missing:
        flags_text = ", ".join(f"--{name}" for name in missing)
        raise UsageError(f"missing {flags_text} (give the flag or put it in a job file with -f)")
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
