"""The server's error messages, said in the CLI's words.

The REST API speaks to HTTP clients (``list your jobs with GET /api/v1/jobs``, ``query
parameter 'state'``); a CLI user typed ``jigsaw-cli status`` and ``--state``. The error body's
machine-readable fields (``job_id``, ``field``) say which case it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SPEC_FLAGS = {
    name: "--" + name.replace("_", "-")
    for name in (
        "name",
        "model",
        "workers",
        "iterations",
        "priority",
        "spb",
        "parallelism",
        "batch_size",
        "learning_rate",
        "seed",
        "queue",
    )
}
"""A job spec's fields and the ``submit`` flags that set them."""


def cli_detail(status: int, body: Mapping[str, Any], detail: str, flags: Mapping[str, str]) -> str:
    """``detail`` rephrased for the command line. ``flags`` maps the request's query
    parameters to the flags the user typed (``{"state": "--state"}``)."""
    job_id = body.get("job_id")
    if status == 404 and isinstance(job_id, str):
        return f"no job with id {job_id!r}; `jigsaw-cli list` shows your jobs"
    if status == 404 and detail.startswith("no such route"):
        return "the server does not know this request: it is older than this jigsaw-cli"
    field = body.get("field")
    if not isinstance(field, str):
        return detail
    if detail.startswith("unknown field") and field not in SPEC_FLAGS:
        return (
            f"unknown field {field!r} in the job file; remove it (the fields are the flags of "
            "`jigsaw-cli submit --help`, with _ for -)"
        )
    if field in flags:
        return detail.replace(f"query parameter {field!r}", flags[field])
    return detail
