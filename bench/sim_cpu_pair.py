"""CPU cost of a ``jigsaw-cli simulate`` replay: the working tree beside another commit.

The box's speed moves absolute CPU figures by up to 2x from one session to the next, so a time
measured today cannot be held against one measured yesterday. This runs the same replay twice
at the same time, one process per core: once on the working tree ("ours") and once on a
detached worktree of ``--against`` ("theirs"). Both see the same box at the same moment; the
ratio ours/theirs of their CPU seconds (user + system, from ``os.wait4``) is the figure to
publish, never either absolute time. Each side also reports its peak RSS and the decision-log
hashes, so a speed change is shown not to change scheduling. Prints one JSON object.

    .venv/bin/python -m bench.sim_cpu_pair --against 314417a -- ../shared/traces/philly.csv \\
        --policy jigsaw --gpus 256 --gpus-per-node 8 --start 2017-09-18 --end 2017-10-02
    .venv/bin/python -m bench.sim_cpu_pair --against HEAD --runs 3 -- <simulate args...>
    .venv/bin/python -m bench.sim_cpu_pair --against HEAD --instructions -- <simulate args...>

``--instructions`` runs each side under valgrind's cachegrind (no cache or branch simulation,
``PYTHONHASHSEED=0``) and reports the instructions each executed and their ratio: a count the
box's speed and its neighbours do not move (two runs of one tree agree within about 1%,
where one CPU pair moves by about 6%), at about 15x the replay's time. It is a proxy: an
instruction is not a second (memory stalls and numpy's vector loops weigh differently), so
a published CPU figure still comes from a pair without it. Under valgrind the floats can
differ from a native run's in their last bits (it emulates the vector unit), so the decision
log can differ from the native replay's: both sides run under the same emulation, and
``logs_equal`` says whether they decided alike.

The worktree is made beside the repository (``<repo parent>/.cpu_pair_<random>``) so that a
relative path such as ``../shared/traces/philly.csv`` names the same file from both sides; it
is removed at the end, also on error. Both sides run this interpreter, so the worktree needs no
``.venv``; both trees are byte-compiled before timing. "dirty" counts changes to tracked files
only (untracked files are ignored). A replay of a few seconds is mostly imports and moves by
+-15% from pair to pair: time a replay of a minute or more, or take the median of ``--runs``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("jigsaw", "cli")
"""What a replay imports from the tree (the rest comes from the venv)."""
METRICS = ("avg_jct_s", "p99_jct_s", "makespan_s")
CLI_SHIM = (
    "import sys; sys.argv=['jigsaw-cli','simulate',*sys.argv[1:]]; "
    "from cli.main import main; main()"
)
CACHEGRIND = (
    "valgrind",
    "--tool=cachegrind",
    "--cache-sim=no",
    "--branch-sim=no",
    "--cachegrind-out-file=/dev/null",
)
"""What ``--instructions`` runs each side under: an instruction count and nothing else."""
_I_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def find_key(data: Any, key: str) -> Any:
    """The first value under ``key`` anywhere in ``data`` (depth first, in order), else None."""
    found = find_all(data, key)
    return found[0] if found else None


def find_all(data: Any, key: str) -> list[Any]:
    """Every value under ``key`` anywhere in ``data``, depth first, in order."""
    if isinstance(data, dict):
        hits = [data[key]] if key in data else []
        return hits + [v for child in data.values() for v in find_all(child, key)]
    if isinstance(data, list):
        return [v for child in data for v in find_all(child, key)]
    return []


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def child_command(simulate_args: list[str], instructions: bool = False) -> list[str]:
    command = [sys.executable, "-c", CLI_SHIM, *simulate_args, "-o", "json"]
    return [*CACHEGRIND, *command] if instructions else command


def instructions_of(stderr: str) -> int | None:
    """The instructions cachegrind counted (its ``I refs`` line), or ``None``."""
    found = _I_REFS.search(stderr)
    return int(found.group(1).replace(",", "")) if found else None


def child_env(cwd: Path, base: dict[str, str], shared: Path) -> dict[str, str]:
    """``base`` with ``cwd`` first on PYTHONPATH, so the child imports the code of its own tree.

    The project is installed in editable mode pointing at the main checkout, but setuptools'
    editable finder is appended to ``sys.meta_path``, after the path finder, so PYTHONPATH wins.
    Checked: from the worktree, ``PYTHONPATH=<worktree> .venv/bin/python -c "import jigsaw;
    print(jigsaw.__file__)"`` prints ``<worktree>/jigsaw/__init__.py``; without it, from /tmp,
    it prints the main checkout's.
    """
    env = dict(base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(cwd), base.get("PYTHONPATH")) if p)
    if "JIGSAW_SHARED_DIR" not in env and shared.is_dir():
        env["JIGSAW_SHARED_DIR"] = str(shared.resolve())
    return env


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"git {shlex.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


class Replay:
    """One side's replay, started at once; ``wait`` reaps it with its rusage, ``result`` reads
    its JSON (or fails with one line naming the side)."""

    def __init__(
        self, side: str, cwd: Path, args: list[str], core: int | None, instructions: bool = False
    ) -> None:
        self.side = side
        self.stdout: IO[bytes] = tempfile.TemporaryFile()
        self.stderr: IO[bytes] = tempfile.TemporaryFile()
        env = child_env(cwd, dict(os.environ), REPO.parent / "shared")
        if instructions:
            env["PYTHONHASHSEED"] = "0"  # the same hashes, so the same dict and set work
        self.process = subprocess.Popen(
            child_command(args, instructions),
            cwd=cwd,
            env=env,
            stdout=self.stdout,
            stderr=self.stderr,
        )
        if core is not None:
            os.sched_setaffinity(self.process.pid, {core})

    def wait(self) -> None:
        _, status, self.usage = os.wait4(self.process.pid, 0)
        self.process.returncode = os.waitstatus_to_exitcode(status)

    def result(self) -> dict[str, Any]:
        with self.stdout, self.stderr:
            self.stderr.seek(0)
            stderr = self.stderr.read().decode(errors="replace")
            if self.process.returncode != 0:
                lines = [line for line in stderr.strip().splitlines() if not line.startswith("==")]
                last = lines[-1] if lines else "(no stderr)"
                code = self.process.returncode
                raise SystemExit(f"{self.side} replay failed (exit {code}): {last}")
            self.stdout.seek(0)
            payload = json.load(self.stdout)
        return {
            "instructions": instructions_of(stderr),
            "cpu_s": self.usage.ru_utime + self.usage.ru_stime,
            "rss_mb": round(self.usage.ru_maxrss / 1024, 1),  # ru_maxrss is KiB on Linux
            "log": ",".join(find_all(payload, "decision_log_sha256")),
            "metrics": {name: find_key(payload, name) for name in METRICS},
        }


def run_pair(
    worktree: Path, args: list[str], swap: bool, instructions: bool = False
) -> dict[str, Any]:
    cores = sorted(os.sched_getaffinity(0))
    ours_core, theirs_core = (cores[0], cores[1]) if len(cores) >= 2 else (None, None)
    if swap:
        ours_core, theirs_core = theirs_core, ours_core
    replays = [
        Replay("ours", REPO, args, ours_core, instructions),
        Replay("theirs", worktree, args, theirs_core, instructions),
    ]
    for replay in replays:  # both reaped before either can fail: no replay outlives the pair
        replay.wait()
    ours, theirs = (replay.result() for replay in replays)
    counted: dict[str, Any] = {}
    if instructions:
        if ours["instructions"] is None or theirs["instructions"] is None:
            raise SystemExit("cachegrind printed no instruction count (its 'I refs' line)")
        counted = {
            "ours_instructions": ours["instructions"],
            "theirs_instructions": theirs["instructions"],
            "instruction_ratio": round(ours["instructions"] / theirs["instructions"], 4),
        }
    return {
        **counted,
        "ours_cpu_s": round(ours["cpu_s"], 3),
        "theirs_cpu_s": round(theirs["cpu_s"], 3),
        "ratio": round(ours["cpu_s"] / theirs["cpu_s"], 4),
        "ours_rss_mb": ours["rss_mb"],
        "theirs_rss_mb": theirs["rss_mb"],
        "ours_log": ours["log"],
        "theirs_log": theirs["log"],
        "logs_equal": bool(ours["log"]) and ours["log"] == theirs["log"],
        "ours_metrics": ours["metrics"],
        "theirs_metrics": theirs["metrics"],
    }


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="git ref to compare with")
    parser.add_argument("--runs", type=int, default=1, help="pairs to run, one after the other")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count each side's instructions under valgrind's cachegrind (a steady proxy)",
    )
    args = parser.parse_args(argv[:split])
    simulate_args = argv[split + 1 :]
    if not simulate_args:
        parser.error("give the simulate arguments after --")
    if args.instructions and shutil.which(CACHEGRIND[0]) is None:
        raise SystemExit("--instructions needs valgrind on the PATH (apt install valgrind)")
    against = git("rev-parse", "--verify", f"{args.against}^{{commit}}")
    ours = {
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }
    worktree = Path(tempfile.mkdtemp(prefix=".cpu_pair_", dir=REPO.parent))
    try:
        git("worktree", "add", "--detach", str(worktree), against)
        for tree in (REPO, worktree):  # byte-compile first: a fresh worktree has no .pyc files
            subprocess.run([sys.executable, "-m", "compileall", "-q", *PACKAGES], cwd=tree)
        pairs = [
            run_pair(worktree, simulate_args, i % 2 == 1, args.instructions)
            for i in range(args.runs)
        ]
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(worktree)], cwd=REPO, capture_output=True
        )
        if worktree.exists():  # `worktree add` or `remove` failed: what is left goes too
            shutil.rmtree(worktree, ignore_errors=True)
            subprocess.run(["git", "worktree", "prune"], cwd=REPO, capture_output=True)
    print(
        json.dumps(
            {
                "command": shlex.join(simulate_args),
                "against": {"ref": args.against, "commit": against},
                "ours": ours,
                "pairs": pairs,
                "median_ratio": round(median([pair["ratio"] for pair in pairs]), 4),
                **(
                    {
                        "median_instruction_ratio": round(
                            median([pair["instruction_ratio"] for pair in pairs]), 4
                        )
                    }
                    if args.instructions
                    else {}
                ),
                "logs_equal": all(pair["logs_equal"] for pair in pairs),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
