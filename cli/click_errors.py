"""The command-line parser's own exceptions, from wherever this Typer keeps them: Typer 0.29
vendors Click as ``typer._click``; older Typer versions use Click itself."""

from __future__ import annotations

try:
    from typer._click.exceptions import (  # type: ignore[import-not-found,unused-ignore]
        NoArgsIsHelpError,
        UsageError,
    )
except ImportError:  # pragma: no cover - a Typer that depends on Click
    from click.exceptions import (  # type: ignore[assignment,no-redef,unused-ignore]
        NoArgsIsHelpError,
        UsageError,
    )

__all__ = ["NoArgsIsHelpError", "UsageError"]
