"""Where output goes: data to stdout (table, json or yaml), progress and errors to stderr.

``-o json`` is a stable interface for scripts: it prints exactly the JSON the REST API returned
(documented in docs/CLI.md), indented, with no colour. Rich honours ``NO_COLOR`` by itself.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console, RenderableType

UNBOUNDED_WIDTH = 1_000_000
"""Width for output to a pipe or file: a table keeps every column whole, whatever ``COLUMNS``
says, because no terminal will wrap it (``jigsaw-cli simulate > results.txt``)."""


def _width(stream: object) -> int | None:
    is_tty = getattr(stream, "isatty", lambda: False)()
    return None if is_tty else UNBOUNDED_WIDTH


stdout = Console(highlight=False, width=_width(sys.stdout))
stderr = Console(stderr=True, highlight=False, width=_width(sys.stderr))


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


class ListFormat(StrEnum):
    """``list``'s formats: the others' and ``wide`` (more columns, as ``kubectl get -o wide``)."""

    table = "table"
    wide = "wide"
    json = "json"
    yaml = "yaml"


OutputOption = Annotated[
    OutputFormat,
    typer.Option("--output", "-o", help="table for people; json or yaml for scripts."),
]
"""The ``--output``/``-o`` option every verb that prints data takes."""


def emit(data: Any, fmt: OutputFormat, table: Callable[[], RenderableType | None]) -> None:
    """Print ``data`` as JSON/YAML verbatim, or as the human view that ``table`` builds."""
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    elif fmt is OutputFormat.yaml:
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        renderable = table()
        if renderable is not None:
            print_renderable(renderable)
    sys.stdout.flush()


def print_renderable(renderable: RenderableType) -> None:
    """Print to stdout; in a pipe or file, without the padding rich puts after table rows."""
    if stdout.is_terminal:
        stdout.print(renderable)
        return
    with stdout.capture() as captured:
        stdout.print(renderable)
    sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def note(message: str) -> None:
    """A progress or status line for humans: always stderr, so stdout stays parseable."""
    stderr.print(message, markup=False)


def error_line(message: str) -> None:
    stderr.print(f"error: {message}", markup=False, style="bold red", soft_wrap=True)
