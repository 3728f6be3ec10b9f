"""A job named as the user knows it: its id (``j-0123456789ab``), or its name (``status q2``),
as ``squeue --name`` finds jobs by name. An id typed without its ``j-`` gets a "did you
mean"."""

from __future__ import annotations

import re

from cli.client import JOB_ID, JigsawClient
from cli.errors import UsageError

BARE_ID = re.compile(r"[0-9a-f]{12}")
SHOWN_MATCHES = 5


def job_id_of(client: JigsawClient, text: str) -> str:
    """The id of the job ``text`` names: an id as it is; otherwise the one job of that name
    (a usage error when none or several are)."""
    if text.startswith("j-") or JOB_ID.fullmatch(text) is None:
        return text  # an id, or what the client refuses as one with its own message
    page = client.list_jobs(name=text.replace("*", ""), limit=SHOWN_MATCHES + 1)
    items = list(page.get("items", []))
    found = [job for job in items if job.get("name") == text] or items
    if len(found) == 1:
        return str(found[0]["id"])
    if found:
        shown = ", ".join(f"{job['id']} ({job['state']})" for job in found[:SHOWN_MATCHES])
        rest = int(page.get("total", 0)) - SHOWN_MATCHES
        more = f" and {rest} more" if rest > 0 else ""
        raise UsageError(f"{len(found)} jobs are named {text!r}: {shown}{more}; give its id")
    hint = (
        f"did you mean j-{text}?"
        if BARE_ID.fullmatch(text)
        else "`jigsaw-cli list` shows your jobs"
    )
    raise UsageError(f"no job with id or name {text!r}; {hint}")


def job_ids_of(client: JigsawClient, texts: list[str]) -> list[str]:
    return [job_id_of(client, text) for text in texts]
