"""A table of CLI mistakes: each prints exactly one ``error:`` line on stderr naming what to
fix, exits 2 and shows no traceback. The real CLI as a subprocess against a real server (one
per module; the server has 4 GPUs)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from pathlib import Path

import pytest

from api.idempotency import request_hash
from api.schemas.jobs import JobCreate
from tests.cli.conftest import Cli
from tests.conftest import ServerProcess

pytestmark = pytest.mark.integration

JOB = ["--name", "m", "--model", "digits_cnn", "--workers", "2", "--iterations", "5"]
ADAPTIVE = [*JOB, "--batch-size", "24", "--batch-policy", "adaptive"]


@dataclasses.dataclass(frozen=True)
class Mistake:
    case: str
    args: list[str]
    says: str
    """A phrase the one line must contain (case-insensitive)."""
    file: bytes | None = None
    """Written to ``job.yaml`` (or ``job.json`` if the args name it) in a fresh directory."""
    env: dict[str, str] = dataclasses.field(default_factory=dict)


MISTAKES = [
    # -- job files ------------------------------------------------------------------------
    Mistake(
        "file not UTF-8",
        ["submit", "-f", "job.yaml"],
        "not UTF-8",
        file="name: é\n".encode("latin-1"),
    ),
    Mistake(
        "UTF-16 file", ["submit", "-f", "job.yaml"], "not UTF-8", file="name: a\n".encode("utf-16")
    ),
    Mistake(
        "name is a date",
        ["submit", "-f", "job.yaml"],
        "job.yaml:1: field 'name'",
        file=b"name: 2024-01-01\nmodel: mlp\nworkers: 1\niterations: 5\n",
    ),
    Mistake(
        "learning rate .nan",
        ["submit", "-f", "job.yaml"],
        "finite",
        file=b"name: a\nmodel: mlp\nworkers: 1\niterations: 5\nlearning_rate: .nan\n",
    ),
    Mistake(
        "learning rate .inf",
        ["submit", "-f", "job.yaml"],
        "job.yaml:5",
        file=b"name: a\nmodel: mlp\nworkers: 1\niterations: 5\nlearning_rate: .inf\n",
    ),
    Mistake(
        "binary value",
        ["submit", "-f", "job.yaml"],
        "binary data",
        file=b"name: !!binary aGVsbG8=\nmodel: mlp\nworkers: 1\niterations: 5\n",
    ),
    Mistake(
        "list that holds itself",
        ["submit", "-f", "job.yaml"],
        "job.yaml:5: field 'spb' holds itself",
        file=b"name: a\nmodel: mlp\nworkers: 1\niterations: 5\nspb: &x [1, *x]\n",
    ),
    Mistake(
        "JSON file with NaN",
        ["submit", "-f", "job.json"],
        "finite",
        file=b'{"name": "a", "model": "mlp", "workers": 1, "iterations": 5, "learning_rate": NaN}',
    ),
    Mistake(
        "key given twice in a YAML file",
        ["submit", "-f", "job.yaml"],
        "job.yaml:5: key 'workers' appears twice (also on line 3)",
        file=b"name: a\nmodel: mlp\nworkers: 1\niterations: 5\nworkers: 4\n",
    ),
    Mistake(
        "key given twice in a JSON file",
        ["submit", "-f", "job.json"],
        "job.json:5: key 'model' appears twice (also on line 2)",
        file=b'{"name": "a",\n"model": "mlp",\n"workers": 1,\n"iterations": 5,\n"model": "mlp"}',
    ),
    Mistake("file holds a list", ["submit", "-f", "job.yaml"], "mapping", file=b"- a\n- b\n"),
    Mistake(
        "workers a word in a file",
        ["submit", "-f", "job.yaml"],
        "workers",
        file=b"name: a\nmodel: mlp\nworkers: four\niterations: 5\n",
    ),
    # -- flags ------------------------------------------------------------------------------
    Mistake("learning rate nan", ["submit", *JOB, "--learning-rate", "nan"], "--learning-rate"),
    Mistake("learning rate inf", ["submit", *JOB, "--learning-rate", "inf"], "finite"),
    Mistake("unknown flag", ["submit", "--bogus"], "no such option: --bogus"),
    Mistake("workers not a number", ["submit", "--workers", "x"], "--workers"),
    Mistake("unknown command", ["sumbit"], "no such command"),
    Mistake("limit out of range", ["list", "--limit", "0"], "--limit"),
    Mistake("missing argument", ["status"], "missing argument"),
    Mistake("unknown output format", ["list", "-o", "xml"], "--output"),
    Mistake("token create without name", ["token", "create"], "--name"),
    # -- the token ------------------------------------------------------------------------------
    Mistake("non-ASCII token", ["list"], "JIGSAW_TOKEN", env={"JIGSAW_TOKEN": "tök"}),
    Mistake("token with a newline", ["list"], "line break", env={"JIGSAW_TOKEN": "ab\ncd"}),
    Mistake("token with a space", ["list"], "a space", env={"JIGSAW_TOKEN": "ab cd"}),
    # -- the server's refusals, one line each ----------------------------------------------------
    Mistake(
        "unknown model", ["submit", *JOB[:2], "--model", "no_such_model", *JOB[4:]], "unknown model"
    ),
    Mistake(
        "path as model", ["submit", *JOB[:2], "--model", "../../etc/passwd", *JOB[4:]], "model"
    ),
    Mistake("bad entrypoint", ["submit", *JOB[:2], "--model", "pkg.mod:", *JOB[4:]], "entrypoint"),
    Mistake("depth beyond K", ["submit", *JOB, "--spb", "0,9"], "spb"),
    Mistake("uniform beyond K", ["submit", *JOB, "--spb", "uniform:50"], "4 blocks"),
    Mistake(
        "gang larger than the cluster", ["submit", *JOB[:4], "--workers", "5", *JOB[6:]], "4 GPUs"
    ),
    Mistake("priority out of range", ["submit", *JOB, "--priority", "5000"], "priority"),
    Mistake(
        "dry run of an unknown model",
        ["submit", "--dry-run", *JOB[:2], "--model", "nope", *JOB[4:]],
        "model",
    ),
    Mistake("unknown state", ["list", "--state", "BOGUS"], "state"),
    Mistake("empty queue filter", ["list", "--queue", ""], "error: --queue: "),
    Mistake("empty user filter", ["list", "--user", ""], "error: --user: "),
    # -- the server's refusal of a field, said where the user wrote it (issue 25) -------------
    Mistake(
        "bad plan from a flag", ["submit", *JOB, "--spb", "bogus"], "error: --spb: unknown plan"
    ),
    Mistake("priority from a flag", ["submit", *JOB, "--priority", "5000"], "error: --priority: "),
    Mistake("empty queue from a flag", ["submit", *JOB, "--queue", ""], "error: --queue: "),
    Mistake(
        "bad plan in a file",
        ["submit", "-f", "job.yaml"],
        "job.yaml:5: field 'spb': unknown plan 'bogus'",
        file=b"name: a\nmodel: mlp\nworkers: 1\niterations: 5\nspb: bogus\n",
    ),
    Mistake(
        "fractional workers in a file",
        ["submit", "-f", "job.yaml"],
        "job.yaml:3: field 'workers'",
        file=b"name: a\nmodel: mlp\nworkers: 2.5\niterations: 5\n",
    ),
    Mistake(
        "unknown field in a file",
        ["submit", "-f", "job.yaml"],
        "job.yaml:5: unknown field 'gpus'; remove it",
        file=b"name: a\nmodel: mlp\nworkers: 1\niterations: 5\ngpus: 2\n",
    ),
    Mistake(
        "gang larger than the cluster in a file",
        ["submit", "--dry-run", "-f", "job.yaml"],
        "job.yaml:3: workers=9 can never start",
        file=b"name: a\nmodel: mlp\nworkers: 9\niterations: 5\n",
    ),
    Mistake(
        "bad plan in a JSON file",
        ["submit", "-f", "job.json"],
        "job.json:3: field 'spb'",
        file=b'{"name": "a", "model": "mlp",\n"workers": 1, "iterations": 5,\n"spb": "zz"}',
    ),
    Mistake(
        "a flag overrides the file's line",
        ["submit", "-f", "job.yaml", "--spb", "zz"],
        "error: --spb: unknown plan 'zz'",
        file=b"name: a\nmodel: mlp\nworkers: 1\niterations: 5\nspb: bogus\n",
    ),
    # -- a job id that would reach another route (it used to crash or say 'HTTP 307') --------
    Mistake("job id with a slash", ["status", "j-000000000000/events"], "is not a job id"),
    Mistake("job id climbing up", ["describe", "../scheduler"], "'../scheduler' is not a job id"),
    Mistake("empty job id", ["describe", ""], "'' is not a job id"),
    Mistake("job id with a query", ["logs", "?x=1"], "is not a job id"),
    Mistake("job id of dots", ["cancel", ".."], "is not a job id"),
    # -- issue 30: flags named as typed, no Python reprs, the queue's and list's flags -----------
    Mistake(
        "inverted adaptive bounds from flags",
        ["submit", *ADAPTIVE, "--min-global-batch", "192", "--max-global-batch", "24"],
        "error: --min-global-batch (192) is above --max-global-batch (24)",
    ),
    Mistake(
        "adaptive bounds some size can never use",
        [
            "submit",
            *JOB,
            "--batch-size",
            "1",
            "--min-workers",
            "1",
            "--max-workers",
            "4",
            "--batch-policy",
            "adaptive",
            "--min-global-batch",
            "1",
            "--max-global-batch",
            "2",
        ],
        "at 3, 4 worker(s) no global batch in --min-global-batch..--max-global-batch (1..2)",
    ),
    Mistake(
        "inverted adaptive bounds in a file",
        ["submit", "-f", "job.yaml"],
        "job.yaml:6: min_global_batch (192) is above max_global_batch (24)",
        file=b"name: a\nmodel: mlp\nworkers: 2\niterations: 5\nbatch_policy: adaptive\n"
        b"min_global_batch: 192\nmax_global_batch: 24\nbatch_size: 24\n",
    ),
    Mistake(
        "fixed batch over sizes it does not divide",
        ["submit", *JOB, "--batch-size", "3", "--max-workers", "4"],
        "does not split evenly over 4 workers",
    ),
    Mistake(
        "YAML syntax error",
        ["submit", "-f", "job.yaml"],
        "job.yaml:2: not valid YAML: mapping values are not allowed here (column 11)",
        file=b"name: a\nmodel: mlp: x\nworkers: 1\niterations: 5\n",
    ),
    Mistake(
        "a required field missing from the file",
        ["submit", "-f", "job.yaml"],
        "missing --iterations: give the flag or add iterations: to ",
        file=b"name: a\nmodel: mlp\nworkers: 1\n",
    ),
    Mistake(
        "simulate with an unknown policy",
        ["simulate", "tests/data/philly_excerpt.csv", "--policy", "nope"],
        "choose from fifo, jigsaw, las",
    ),
    Mistake(
        "simulate window not a date",
        ["simulate", "tests/data/philly_excerpt.csv", "--start", "monday"],
        "--start 'monday' is not a date such as 2017-10-02",
    ),
    Mistake("list sorted by no key", ["list", "--sort", "age"], "--sort 'age' is not a sort key"),
    Mistake("list since no time", ["list", "--since", "soon"], "--since 'soon' is neither"),
    Mistake("id without its j-", ["status", "0123456789ab"], "did you mean j-0123456789ab?"),
    Mistake("no job of that name", ["describe", "no-such-job"], "no job with id or name"),
    Mistake(
        "a revoked or unknown token",
        ["list"],
        "invalid or revoked token; ask an admin for a new one",
        env={"JIGSAW_TOKEN": "jgs_nope"},
    ),
    Mistake(
        "an empty token sends none",
        ["list"],
        "JIGSAW_TOKEN is set but empty, so no token was sent",
        env={"JIGSAW_TOKEN": ""},
    ),
    Mistake(
        "bad token scope",
        ["token", "create", "--name", "t", "--user", "u", "--scope", "x"],
        "--scope: ",
    ),
]


def test_the_table_covers_the_reported_mistakes() -> None:
    assert len(MISTAKES) >= 25
    assert len({m.case for m in MISTAKES}) == len(MISTAKES)


@pytest.mark.parametrize("mistake", MISTAKES, ids=lambda m: m.case)
def test_a_mistake_is_one_error_line_and_exit_2(cli: Cli, tmp_path: Path, mistake: Mistake) -> None:
    args = list(mistake.args)
    if mistake.file is not None:
        name = "job.json" if "job.json" in args else "job.yaml"
        path = tmp_path / name
        path.write_bytes(mistake.file)
        args = [str(path) if arg == name else arg for arg in args]

    result = cli(*args, **mistake.env)

    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert mistake.says.lower() in lines[0].lower(), lines[0]
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""


def test_keyed_submit_waits_through_a_dead_claim_saying_why(
    cli: Cli, cli_server: ServerProcess
) -> None:
    """A server died between claiming a key and storing its job: the key answers 409 until
    the claim lapses (60 s). The CLI says what it waits for, retries and gets its job."""
    spec = {"name": "keyed", "model": "mlp", "workers": 1, "iterations": 5}
    digest = request_hash(JobCreate.model_validate(spec).model_dump())
    database = Path(cli_server.env["JIGSAW_DATA_DIR"]) / "jigsaw.db"
    with sqlite3.connect(database) as conn:  # the dead server's claim, 52 s old
        conn.execute(
            "INSERT INTO idempotency_keys (username, key, request_hash, status, created_at) "
            "VALUES ('admin', 'dead-claim', ?, 'in_flight', ?)",
            (digest, time.time() - 52),
        )
    args = ["--name", "keyed", "--model", "mlp", "--workers", "1", "--iterations", "5"]
    result = cli("submit", *args, "--idempotency-key", "dead-claim", "-o", "json", timeout=90)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["name"] == "keyed"
    waits = [line for line in result.stderr.splitlines() if "still in flight" in line]
    assert 1 <= len(waits) <= 4, result.stderr
    assert "claim lapses after 60 s" in waits[0] and "retrying in 5 s" in waits[0]
