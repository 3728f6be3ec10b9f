"""Why an elastic job has, or has not, been resized, in phrases ``describe`` prints.

The policy decides; this module only reads what it left behind and what the rule needs:

- what the server's policy does with sizes (fifo, las and maxmin never resize; pollux sizes
  every job each round; jigsaw's rule grows into idle GPUs and shrinks for waiting jobs when
  the time it saves pays the restart);
- the reason of this job's decision in the last round, and of its last resize event (the
  policy writes each change's gain there);
- the state of the cluster the rule reads: idle GPUs, waiting jobs, the job's hold after its
  last resize, and an upper bound of what growing could save (linear scaling of the rate it
  runs at), against the restart the rule must pay.
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
    if policy not in RESIZING_POLICIES or (policy == "jigsaw" and not _get(config, "resize")):
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
    story.extend(_jigsaw_rule(job, config, size, free_gpus, waiting_jobs, rate, now))
    return story


def _jigsaw_rule(
    job: Job,
    config: object,
    size: int,
    free_gpus: int,
    waiting_jobs: int,
    rate: float | None,
    now: float,
) -> list[str]:
    low, high = job.spec.worker_range
    priced = bool(_get(config, "resize_priced"))
    margin = float(_get(config, "resize_margin"))
    restart = job.resize_s
    restart_words = (
        f"its last resize took {restart:.0f} s"
        if restart is not None
        else f"a restart costs about {float(_get(config, 'resize_floor_s')):.0f} s or more "
        "before one is measured"
    )
    if priced and restart is not None and job.resized_at is not None:
        until = job.resized_at + float(_get(config, "resize_hold")) * restart
        if now < until:
            return [
                f"held until {_clock(until)}: no resize within {_get(config, 'resize_hold'):g} "
                f"x its last resize's {restart:.0f} s"
            ]
    if waiting_jobs:
        if size <= low:
            return [f"at its min_workers ({low}) while {_waiting(waiting_jobs)}"]
        if not priced:
            return [f"{_waiting(waiting_jobs)}: it shrinks to {low} at the next round"]
        return [
            f"{_waiting(waiting_jobs)}: it shrinks towards {counted(low, 'worker')} only when "
            "what they "
            f"gain pays what it loses plus {1 + margin:g} x the restart ({restart_words})"
        ]
    if size >= high:
        return [f"at its max_workers ({high}) and nobody waits"]
    if free_gpus <= 0:
        return [f"no idle GPUs to grow into (at {size} of up to {high} workers)"]
    target = min(high, size + free_gpus)
    if not priced:
        return [f"{counted(free_gpus, 'idle GPU')}: it grows to {target} at the next round"]
    need = (
        f"growing must save {1 + margin:g} x the restart ({restart_words})"
        if restart is None
        else f"growing must save {1 + margin:g} x {restart:.0f} s = "
        f"{(1 + margin) * restart:.0f} s ({restart_words})"
    )
    if rate is None or rate <= 0:
        return [
            f"{counted(free_gpus, 'idle GPU')}, up to {target} workers: {need}; no rate "
            "reported yet"
        ]
    left = job.remaining_iterations / rate
    most = left * (1 - size / target)
    said = (
        f"{counted(free_gpus, 'idle GPU')}: growing to {target} would save at most "
        f"{most:.0f} s of its {left:.0f} s left (if it scaled linearly); {need}"
    )
    floor = (1 + margin) * (
        restart if restart is not None else float(_get(config, "resize_floor_s"))
    )
    if most > floor:
        said += (
            "; the policy prices each size at the oracle's predicted rate, which says it "
            "does not pay yet"
        )
    return [said]


def _jigsaw_config(policy: str, options: Mapping[str, Any]) -> object:
    if policy != "jigsaw":
        return None
    try:
        return policy_options(policy, dict(options)).get("config")
    except ValueError:
        return None


_DEFAULTS = {
    "resize": True,
    "resize_priced": True,
    "resize_margin": 1.0,
    "resize_hold": 4.0,
    "resize_floor_s": 14.8,
}
"""JigsawConfig's defaults, for a server that sets no config (and a config that lost one)."""


def _get(config: object, name: str) -> Any:
    return getattr(config, name, _DEFAULTS[name])


def _waiting(count: int) -> str:
    return "1 job waits" if count == 1 else f"{count} jobs wait"


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M:%SZ")
