"""`make run`'s narrator: follow jobs until they end, printing every change of state with its
reason as it happens (a resize names its sizes and why) and, every few seconds, each running
job's size and measured rate, so a restart or a slower size is seen and explained.

    python scripts/watch_jobs.py JOB... [--every SECONDS]

Reads the server and token as jigsaw-cli does (JIGSAW_URL, JIGSAW_TOKEN, the config file).
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime
from typing import Any

from cli.context import make_client

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


def moment(at: str | None) -> datetime:
    """An API timestamp as an aware datetime (now when there is none)."""
    return datetime.fromisoformat(at.replace("Z", "+00:00")) if at else datetime.now().astimezone()


def clock(at: str | None) -> str:
    """``HH:MM:SS`` local time of an API timestamp (now when there is none)."""
    return moment(at).astimezone().strftime("%H:%M:%S")


def event_line(name: str, event: dict[str, Any]) -> str:
    """One event: the move (``RUNNING -> RUNNING`` is a resize or a re-plan) and its reason."""
    before, after = event.get("from_state"), event["to_state"]
    code = str(event.get("code") or "")
    if before == after == "RUNNING":
        what = "resized" if "Resize" in code else "changed"
    else:
        what = f"{before} -> {after}" if before else after
    return f"  {clock(event.get('at'))}  {name:<14} {what}: {event['reason']}"


def rate_line(name: str, job: dict[str, Any], rate: float) -> str:
    workers = job.get("current_workers") or len(job.get("placement") or [])
    done, total = int(job["iterations_done"]), job["iterations"]
    # No iteration since the last line: the gang is starting (a resize restarts it from its
    # checkpoint, which costs a start on every size).
    speed = f"{rate:.1f} it/s" if rate > 0 else "no iteration yet: the gang is (re)starting"
    return f"  {clock(None)}  {name:<14} {workers} worker(s): {done}/{total}, {speed}"


def in_time_order(events: list[tuple[str | None, str]]) -> list[str]:
    """The lines of several jobs' ``(timestamp, line)`` events in time order, each job's
    events (given in the order they happened) kept in that order. A stable sort on the time
    alone: events that share a timestamp (milliseconds) keep their order. Sorting the lines
    too printed "ADMITTED -> RUNNING" before "PENDING: submitted" when a job was admitted and
    started within the millisecond it was submitted."""
    return [line for _, line in sorted(events, key=lambda event: moment(event[0]))]


def job_ordered(events: list[dict[str, Any]]) -> list[str | None]:
    """One job's event timestamps, each raised to the latest before it, so sorting by them
    cannot put an event before one that happened earlier (a store written by an older server
    may hold a decision stamped before the submission it answers)."""
    latest: datetime | None = None
    stamps: list[str | None] = []
    for event in events:
        at = moment(event.get("at"))
        latest = at if latest is None or at > latest else latest
        stamps.append(latest.isoformat())
    return stamps


def watch(job_ids: list[str], every_s: float) -> None:
    seen: dict[str, int] = dict.fromkeys(job_ids, 0)
    last: dict[str, tuple[float, float, int]] = {}
    """job -> (monotonic time, iterations done, workers) at its last rate line."""
    with make_client() as client:
        while True:
            jobs = {job_id: client.get_job(job_id) for job_id in job_ids}
            new: list[tuple[str | None, str]] = []
            for job_id, job in jobs.items():
                events = client.events(job_id)
                stamps = job_ordered(events)
                new.extend(
                    (stamps[i], event_line(job["name"], events[i]))
                    for i in range(seen[job_id], len(events))
                )
                seen[job_id] = len(events)
            for line in in_time_order(new):
                print(line, flush=True)
            for job_id, job in jobs.items():
                if job["state"] != "RUNNING":
                    last.pop(job_id, None)
                    continue
                now, done = time.monotonic(), float(job["iterations_done"])
                workers = int(job.get("current_workers") or 0)
                previous = last.get(job_id)
                if previous is None or previous[2] != workers:
                    last[job_id] = (now, done, workers)  # a new size: measure from here
                elif now - previous[0] >= every_s:
                    rate = (done - previous[1]) / (now - previous[0])
                    print(rate_line(job["name"], job, rate), flush=True)
                    last[job_id] = (now, done, workers)
            if all(job["state"] in TERMINAL for job in jobs.values()):
                return
            time.sleep(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", nargs="+", metavar="JOB")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between rate lines")
    args = parser.parse_args()
    watch(args.jobs, args.every)


if __name__ == "__main__":
    main()
