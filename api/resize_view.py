"""Why an elastic job has, or has not, been resized, in phrases ``describe`` prints.

The policy decides; this module only reads what it left behind and what the rule needs:

- what the server's policy does with sizes (fifo, las and maxmin never resize; pollux and
  jigsaw's joint allocator size every job each round by goodput, a change paying its restart);
- the reason of this job's decision in the last round, and of its last resize event (the
  policy writes each change's gain there);
- the state of the cluster the allocator reads: idle GPUs, waiting jobs, the job's hold, and
  the restart a change pays (measured, else the prior) with the resizes it has had.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from jigsaw.model.domain import Job, JobEvent
from jigsaw.model.wording import counted
from jigsaw.policies.options import policy_options

RESIZING_POLICIES = ("jigsaw", "pollux")
RESIZE_CODE_PREFIX = "Running/Resize"
"""The codes of resize events (``Running/Resized``, ``Running/ResizeReverted``)."""


def resize_story(
    job: Job,
    *,
    policy: str,
    options: Mapping[str, Any],
    events: Sequence[JobEvent],
    last_decisions: Sequence[Mapping[str, Any]],
    free_gpus: int,
    waiting_jobs: int,
    rate: float | None,
    now: float,
) -> list[str] | None:
    """The phrases for an elastic ``job`` (``None`` for a job of fixed size). ``rate``: its
    observed iterations per second; ``waiting_jobs``: other jobs waiting that could fit."""
    if not job.spec.is_elastic:
        return None
    low, high = job.spec.worker_range
    story: list[str] = []
    resized = [e for e in events if str(e.code).startswith(RESIZE_CODE_PREFIX)]
    if resized:
        last = resized[-1]
        story.append(f"last resize ({last.code}) at {_clock(last.at)}: {last.reason}")
    for decision in last_decisions:
        if decision.get("job_id") == job.id and decision.get("kind") == "resize":
            story.append(f"the last round resized it: {decision.get('reason')}")
    config = _jigsaw_config(policy, options)
    if policy not in RESIZING_POLICIES or (
        policy == "jigsaw" and _get(config, "knowledge") == "oracle"
    ):
        story.append(
            f"the policy {policy} does not resize jobs: it keeps the size the job starts with "
            "(a server with JIGSAW_POLICY=jigsaw or pollux resizes elastic jobs)"
        )
        return story
    if not job.state.holds_resources:
        story.append(f"resized only while it runs; it starts at {job.spec.workers} workers")
        return story
    size = len(job.placement)
    if policy == "pollux":
        story.append(
            f"pollux sizes every job each round by its goodput; it keeps {size} workers "
            f"(range {low}..{high}) while no other size raises the cluster's"
        )
        return story
    story.extend(_jigsaw_allocator(job, config, size, free_gpus, waiting_jobs, rate, now))
    return story


def _jigsaw_allocator(
    job: Job,
    config: object,
    size: int,
    free_gpus: int,
    waiting_jobs: int,
    rate: float | None,
    now: float,
) -> list[str]:
    """What holds a running elastic job's size under jigsaw's joint allocator (docs/SCHEDULER.md,
    "jigsaw: the joint allocator"): the facts a user can check, then the price a change pays."""
    del rate
    low, high = job.spec.worker_range
    hold = float(_get(config, "min_hold_s"))
    since = max(t for t in (job.run_started_at, job.resized_at, 0.0) if t is not None)
    if hold > 0 and now - since < hold:
        return [f"held until {_clock(since + hold)}: min_hold_s is {hold:g} s"]
    restart = job.resize_s
    restart_words = (
        f"its last resize took {restart:.0f} s"
        if restart is not None
        else f"{float(_get(config, 'restart_s')):.0f} s before one is measured"
    )
    price = (
        f"a change pays its restart ({restart_words}), discounted by its age and its "
        f"{counted(job.resizes, 'resize')} so far"
    )
    if waiting_jobs:
        if size <= low:
            return [f"at its min_workers ({low}) while {_waiting(waiting_jobs)}"]
        return [
            f"{_waiting(waiting_jobs)}: it shrinks towards {counted(low, 'worker')} when the "
            f"round's objective says their running is worth more than its speed; {price}"
        ]
    if size >= high:
        return [f"at its max_workers ({high}) and nobody waits"]
    if free_gpus <= 0:
        return [f"no idle GPUs to grow into (at {size} of up to {high} workers)"]
    return [
        f"{counted(free_gpus, 'idle GPU')}: jigsaw sizes it each round by goodput from the "
        f"step times its leases measured (at most twice the largest size measured); {price}; "
        "it keeps its size while no other size raises its discounted speedup"
    ]


def _jigsaw_config(policy: str, options: Mapping[str, Any]) -> object:
    if policy != "jigsaw":
        return None
    try:
        return policy_options(policy, dict(options)).get("config")
    except ValueError:
        return None


_DEFAULTS = {"knowledge": "reports", "min_hold_s": 0.0, "restart_s": 30.0}
"""JigsawConfig's defaults, for a server that sets no config (and a config that lost one)."""


def _get(config: object, name: str) -> Any:
    return getattr(config, name, _DEFAULTS[name])


def _waiting(count: int) -> str:
    return "1 job waits" if count == 1 else f"{count} jobs wait"


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M:%SZ")
