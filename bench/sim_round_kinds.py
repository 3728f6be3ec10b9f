"""Which rounds a ``jigsaw-cli simulate`` replay spends its policy's CPU on.

A replay's CPU is mostly its policy's ``decide``, once per round (the CLI's ``cycles``). This
runs the CLI's own path in this process with that method wrapped: each round is timed (CPU,
``time.process_time``) and sorted by what changed since the round before, by whether that
round decided anything, and by whether this one does. The wrapper changes no decision: the
CLI's decision-log hash is printed beside the counts (tests/test_sim_round_kinds.py holds it
equal to a plain replay's). Prints one JSON object.

    .venv/bin/python -m bench.sim_round_kinds -- ../shared/traces/philly.csv \\
        --policy jigsaw --gpus 512 --gpus-per-node 8

What changed, from the round before to this one (``change``):

- ``running-shrank``: a job left the running set (it finished, or the last round stopped it);
- ``running-changed``: the running set changed and none left (starts only);
- ``arrivals-only``: the same jobs run, and jobs joined the waiting ones, none left them;
- ``unchanged``: the same jobs run and wait (only the clock moved);
- ``other``: anything else (a waiting job left without running: it was cancelled or failed);
- ``first``: the replay's first round.

A kind's share of the CPU says what skipping or cheapening those rounds could buy at most:
rounds that decide nothing after a round that decided nothing, with nothing changed, are the
ones a policy's ``stable_until`` could let the replay skip.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cli.main import main as cli_main
from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.snapshot import Snapshot
from jigsaw.policies.base import PolicyBase, policy_factory

CLI_ARGV0 = "jigsaw-cli"
SHOWN = ("policy", "cycles", "decision_log_sha256", "avg_jct_s", "makespan_s", "wall_s")
"""The CLI's figures repeated in the report (the rest of its JSON is left out)."""

Sets = tuple[frozenset[str], frozenset[str]]


def change_between(before: Sets | None, after: Sets) -> str:
    """What changed from one round's running and waiting jobs (ids) to the next's."""
    if before is None:
        return "first"
    (ran, waited), (running, waiting) = before, after
    if ran - running:
        return "running-shrank"
    if running != ran:
        return "running-changed"
    if waiting == waited:
        return "unchanged"
    if waited <= waiting:
        return "arrivals-only"
    return "other"


@dataclass
class RoundKinds:
    """The rounds seen so far, counted and timed by kind."""

    rounds: Counter[tuple[str, bool, bool]] = field(default_factory=Counter)
    cpu_s: defaultdict[tuple[str, bool, bool], float] = field(
        default_factory=lambda: defaultdict(float)
    )
    _last: tuple[Sets, bool] | None = None

    def record(self, sets: Sets, decided: bool, cpu_s: float) -> None:
        before, last_decided = self._last if self._last is not None else (None, False)
        key = (change_between(before, sets), last_decided, decided)
        self.rounds[key] += 1
        self.cpu_s[key] += cpu_s
        self._last = (sets, decided)

    def report(self) -> dict[str, Any]:
        total = sum(self.cpu_s.values())
        dearest_first = sorted(self.rounds, key=lambda key: -self.cpu_s[key])
        kinds = [
            {
                "change": change,
                "after": "decided" if after else "nothing",
                "decides": "yes" if decides else "nothing",
                "rounds": self.rounds[change, after, decides],
                "cpu_s": round(self.cpu_s[change, after, decides], 3),
                "cpu_share": round(self.cpu_s[change, after, decides] / total, 4) if total else 0.0,
            }
            for change, after, decides in dearest_first
        ]
        return {
            "rounds": sum(self.rounds.values()),
            "decide_cpu_s": round(total, 3),
            "kinds": kinds,
        }


def wrap_decide(policy_class: Any, kinds: RoundKinds) -> Callable[[], None]:
    """Time and sort every ``decide`` of ``policy_class`` (a policy class); returns the undo."""
    plain: Callable[[Any, Snapshot], Sequence[object]] = policy_class.decide

    def decide(self: Any, snapshot: Snapshot) -> Sequence[object]:
        started = time.process_time()
        decisions = plain(self, snapshot)
        spent = time.process_time() - started
        running = frozenset(job.id for job in snapshot.running)
        waiting = frozenset(job.id for job in snapshot.waiting)
        kinds.record((running, waiting), bool(decisions), spent)
        return decisions

    policy_class.decide = decide

    def undo() -> None:
        policy_class.decide = plain

    return undo


def policy_of(simulate_args: Sequence[str]) -> str:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--policy", default="jigsaw")
    known, _ = parser.parse_known_args(list(simulate_args))
    policy: str = known.policy
    if "," in policy:
        raise SystemExit("sim_round_kinds: give one --policy, not a list")
    return policy


def run(simulate_args: Sequence[str]) -> dict[str, Any]:
    """The CLI's replay of ``simulate_args`` with its policy's rounds sorted."""
    factory = policy_factory(policy_of(simulate_args))
    if not (isinstance(factory, type) and issubclass(factory, PolicyBase)):
        raise SystemExit("sim_round_kinds: this policy is not built by a PolicyBase class")
    kinds = RoundKinds()
    undo = wrap_decide(factory, kinds)
    printed = io.StringIO()
    argv = sys.argv
    sys.argv = [CLI_ARGV0, "simulate", *simulate_args, "-o", "json"]
    try:
        with contextlib.redirect_stdout(printed):
            try:
                cli_main()
            except SystemExit as stopped:
                if stopped.code not in (None, 0):
                    raise
    finally:
        sys.argv = argv
        undo()
    replay = json.loads(printed.getvalue())
    shown = {key: replay[key] for key in SHOWN if key in replay}
    return {"command": " ".join(simulate_args), "replay": shown, **kinds.report()}


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        raise SystemExit("usage: python -m bench.sim_round_kinds -- <jigsaw-cli simulate args>")
    try:
        report = run(args)
    except InvalidSpecError as error:
        raise SystemExit(f"sim_round_kinds: {error}") from None
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
