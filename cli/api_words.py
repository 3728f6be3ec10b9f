"""The server's error messages, said in the CLI's words.

The REST API speaks to HTTP clients (``list your jobs with GET /api/v1/jobs``, ``query
parameter 'state'``); a CLI user typed ``jigsaw-cli status`` and ``--state``. The error body's
machine-readable fields (``job_id``, ``field``) say which case it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set
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
        "min_workers",
        "max_workers",
        "batch_policy",
        "min_global_batch",
        "max_global_batch",
        "optimizer",
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
    if status == 403 and detail.startswith("this route needs"):
        return "this command needs" + detail.removeprefix("this route needs")
    field = body.get("field")
    if not isinstance(field, str):
        return detail
    if detail.startswith("unknown field") and field not in SPEC_FLAGS:
        return (
            f"unknown field {field!r}; remove it (the fields are the flags of "
            "`jigsaw-cli submit --help`, with _ for -)"
        )
    return in_flag_words(detail, field, flags)


def in_flag_words(detail: str, field: str, flags: Mapping[str, str]) -> str:
    """``query parameter 'state': ...`` or ``field 'scopes.0': ...`` as the flag the user
    typed (``--state: ...``, ``--scope: ...``); ``flags`` maps a parameter or body field to
    its flag. Other details are left as they are."""
    flag = flags.get(field.split(".")[0])
    if flag is None:
        return detail
    for said in (f"query parameter {field!r}", f"field {field!r}"):
        detail = detail.replace(said, flag)
    return detail


def spec_in_user_words(
    detail: str, field: object, flags_given: Set[str], where_in_file: Mapping[str, str]
) -> str:
    """A refusal of a job spec's field said where the user wrote the field: the flag
    (``--spb: unknown plan ...``) or the job file's line (``job file job.yaml:5: field
    'spb': ...``). ``flags_given``: the fields set by flags (they override the file);
    ``where_in_file``: ``path:line`` of each field in the job file. A field the user set by
    a flag, or every field when there is no job file, is called by its flag
    (``--min-global-batch (192) is above --max-global-batch (24)``)."""
    if not isinstance(field, str):
        return detail
    name = field.split(".")[0]
    if name in flags_given:
        detail = in_flag_words(detail, field, SPEC_FLAGS)
    elif name in where_in_file:
        detail = f"job file {where_in_file[name]}: {detail}"
    # Without a job file every field is a flag's (given or left at its default).
    flagged = flags_given if where_in_file else set(SPEC_FLAGS)
    for given in sorted(flagged, key=len, reverse=True):
        if "_" in given and given in SPEC_FLAGS:  # one-word names (workers) read as words
            detail = re.sub(rf"(?<![\w-]){given}\b", SPEC_FLAGS[given], detail)
    return detail
