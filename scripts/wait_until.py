"""`make run`'s waits: poll the server from one process until a condition holds.

    python scripts/wait_until.py SECONDS CONDITION [JOB]

Conditions: ``running JOB`` (it is RUNNING), ``placed JOB`` (it has left PENDING, or some
GPU holds workers of two jobs), ``resized-or-done JOB`` (it has a ``Running/Resized`` event,
or it SUCCEEDED), ``idle`` (no GPU holds a worker). Checks twice a second; exits 0 once the
condition holds, 1 after SECONDS (a check the server fails counts as not yet).

The demo used to poll with one ``jigsaw-cli`` process per check, each about 1.5 s of CPU to
start: on a 2-core box that took about a core from the Ray workers whose progress it waited
for. Reads the server and token as jigsaw-cli does (JIGSAW_URL, JIGSAW_TOKEN, the config file).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from cli.client import JigsawClient
from cli.context import make_client
from cli.errors import CliError


def holds_workers(node: Any, jobs_at_once: int) -> bool:
    """Some ``workers`` list in the cluster's JSON holds workers of at least this many jobs."""
    if isinstance(node, dict):
        workers = node.get("workers")
        if isinstance(workers, list) and len({w.get("job_id") for w in workers}) >= jobs_at_once:
            return True
        return any(holds_workers(value, jobs_at_once) for value in node.values())
    return isinstance(node, list) and any(holds_workers(value, jobs_at_once) for value in node)


def state(client: JigsawClient, job: str) -> str:
    return str(client.get_job(job)["state"])


def check(client: JigsawClient, condition: str, job: str) -> bool:
    if condition == "running":
        return state(client, job) == "RUNNING"
    if condition == "placed":
        return state(client, job) != "PENDING" or holds_workers(client.cluster(), 2)
    if condition == "resized-or-done":
        if any(e.get("code") == "Running/Resized" for e in client.events(job)):
            return True
        return state(client, job) == "SUCCEEDED"
    if condition == "idle":
        return not holds_workers(client.cluster(), 1)
    raise SystemExit(f"unknown condition {condition!r}")


def main() -> None:
    limit_s, condition, *rest = sys.argv[1:]
    job = rest[0] if rest else ""
    deadline = time.monotonic() + float(limit_s)
    with make_client() as client:
        while True:
            try:
                if check(client, condition, job):
                    return
            except CliError:
                pass  # as a failed check did: try again until the deadline
            if time.monotonic() >= deadline:
                sys.exit(1)
            time.sleep(0.5)


if __name__ == "__main__":
    main()
