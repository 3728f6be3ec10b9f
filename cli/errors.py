"""Typed CLI errors. Each carries one line for the user and the exit code it maps to.

Exit codes (documented in docs/CLI.md):

- 0 success;
- 1 the job failed or was cancelled, the server broke (5xx) or could not be reached;
- 2 a usage error: bad flags, an unreadable job file, or a 4xx answer from the server;
- 130 interrupted with Ctrl-C (watching detaches; it never cancels the job).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """An error the user can act on. ``str(error)`` is the one line we print."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(CliError):
    """The command line or a job file needs fixing."""

    exit_code = EXIT_USAGE


class ServerUnreachableError(CliError):
    """No server answered at the configured URL."""

    def __init__(self, url: str, cause: str) -> None:
        super().__init__(
            f"cannot reach the JigSaw server at {url} ({cause}); "
            "start one with `jigsaw-cli serve` or set JIGSAW_URL"
        )
        self.url = url


class ApiError(CliError):
    """The server answered with an error. 4xx means the request needs fixing (exit 2).
    ``rephrased``: ``detail`` already names the field in the CLI's words (its flag)."""

    def __init__(
        self, status_code: int, detail: str, body: dict[str, object], *, rephrased: bool = False
    ) -> None:
        field = body.get("field")
        named = rephrased or not field or str(field) in detail
        message = detail if named else f"{detail} (field: {field})"
        super().__init__(message, exit_code=EXIT_USAGE if status_code < 500 else EXIT_FAILURE)
        self.status_code = status_code
        self.detail = detail
        self.body = body
