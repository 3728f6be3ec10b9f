"""The CLI as a new user meets it (issue 25), as a table: each row runs the real CLI against a
real server and names what its output must say and must not. The server (4 GPUs, per-worker
memory limit 0.25 GiB) runs one pipeline job on every GPU, chosen by ``parallelism auto``
because the model does not fit one worker, and two jobs wait behind it."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import (
    Cli,
    ServerProcess,
    base_env,
    start_embedded_server,
    stop,
    submit_json,
)

pytestmark = pytest.mark.integration

# At lr 0.001 2BW's one-step weight delay costs about 1% (η 0.99), so auto picks the
# pipeline; at the default lr 0.05 its η makes the hybrid the better goodput.
PIPE = [
    "--name",
    "pipe",
    "--model",
    "digits_wide_mlp",
    "--workers",
    "4",
    "--learning-rate",
    "0.001",
]
MLP = ["--name", "m", "--model", "mlp", "--iterations", "5"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_embedded_server(
        tmp_path_factory.mktemp("everyday"), JIGSAW_WORKER_MEMORY_GIB="0.25"
    )
    yield server
    stop(server)


@pytest.fixture
def cli(server: ServerProcess, tmp_path: Path) -> Cli:
    env = base_env(tmp_path)
    env.update(JIGSAW_URL=server.url, JIGSAW_TOKEN=server.admin_token)
    return Cli(env)


@pytest.fixture(scope="module")
def jobs(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The pipeline job (running) and two jobs queued behind it, by name."""
    env = base_env(tmp_path_factory.mktemp("everyday-cli"))
    env.update(JIGSAW_URL=server.url, JIGSAW_TOKEN=server.admin_token)
    cli = Cli(env)
    pipe = str(submit_json(cli, *PIPE, "--iterations", "1000000")["id"])
    one = submit_json(cli, "--name", "one", "--model", "mlp", "--workers", "1", "--iterations", "9")
    two = submit_json(
        cli, "--name", "two", "--model", "digits_cnn", "--workers", "2", "--iterations", "9"
    )
    deadline = time.monotonic() + 60
    while json.loads(cli("status", pipe, "-o", "json").stdout)["state"] != "RUNNING":
        assert time.monotonic() < deadline, "the pipeline job never started"
        time.sleep(0.3)
    return {"pipe": pipe, "one": str(one["id"]), "two": str(two["id"])}


@dataclasses.dataclass(frozen=True)
class Row:
    case: str
    args: list[str]
    says: list[str] = dataclasses.field(default_factory=list)
    """Each must be in stdout (``{pipe}``, ``{one}``: the jobs' ids)."""
    never: list[str] = dataclasses.field(default_factory=list)
    """None may be in stdout or stderr."""
    error: str | None = None
    """When set: exit 2 and this in the one error line."""
    env: dict[str, str] = dataclasses.field(default_factory=dict)


ROWS = [
    # -- pipeline and hybrid jobs are visible (item 3) ---------------------------------------
    Row("list names the plan type", ["list"], ["pipeline 4 stages"]),
    Row(
        "status gives the plan and its eta",
        ["status", "{pipe}"],
        [
            "Plan       pipeline[2bw] stages 1,2,3,4",
            # 2BW's weight delay at the job's lr, as auto ranked it (η of digits_wide_mlp).
            "η          0.991 (2BW's one-step weight delay: the 2BW efficiency model at lr "
            "0.001, momentum 0.9",
        ],
        never=["SPB plan", "Eta", "no plan yet", "1.000 (no SPB"],
    ),
    Row(
        "describe gives each rank's stage and its 2BW eta, no SPB eta table",
        ["describe", "{pipe}"],
        [
            "ROLE",
            "stage 1/4 (block 1)",
            "stage 4/4 (block 4)",
            "0.991 for this pipeline plan (2BW's one-step weight delay",
        ],
        never=["staircase", "DEPTHS", "1 for every pipeline plan"],
    ),
    Row(
        "cluster labels each worker with its stage",
        ["cluster"],
        ["pipe/r0 stage 1/4", "pipe/r3 stage 4/4"],
        never=["d=None"],
    ),
    # -- the queue says why (item 5) ------------------------------------------------------------
    Row(
        "queue gives a reason per job",
        ["queue"],
        ["REASON", "needs 1 GPU, 0 free", "needs 2 GPUs, 0 free, behind one (#1)"],
    ),
    # -- models (item 5) ------------------------------------------------------------------------
    Row(
        "models lists the zoo against the server's limit",
        ["models"],
        # At the default lr the hybrid (85.6 MiB) has the better goodput than the pipeline.
        [
            "digits_wide_mlp",
            "256.0 MiB",
            "no  304.8 MiB",
            "yes  105.1 MiB",
            "yes* 85.6 MiB",
            # η as auto ranked them at the default lr 0.05: 2BW's delay costs digits_wide_mlp
            # 96% of its progress per sample, the hybrid nothing.
            "pipeline 0.041 (2BW's one-step weight delay); hybrid 1.000 (no SPB)",
            "\n2BW's one-step weight delay: the 2BW efficiency model at lr 0.05, momentum 0.9; "
            "no SPB",
        ],
        never=["pipeline/hybrid 1"],
    ),
    Row("models for one worker", ["models", "--workers", "1"], ["1 worker x", "full backprop"]),
    # -- words a user understands (items 4, 5) ---------------------------------------------
    Row("flags take no <bool>", ["submit", "--help"], ["-w, --watch", "--dry-run  "], ["<bool>"]),
    Row(
        "a missing job in CLI words",
        ["status", "j-000000000000"],
        never=["GET /api", "/api/v1"],
        error="no job with id 'j-000000000000'; `jigsaw-cli list` shows your jobs",
    ),
    Row(
        "a bad --state names the flag",
        ["list", "-s", "bogus"],
        never=["query parameter"],
        error="--state 'BOGUS' is not a job state",
    ),
    Row(
        "logs --since wants a duration",
        ["logs", "{pipe}", "--since", "yesterday"],
        error="--since 'yesterday' is not a duration",
    ),
    Row("logs --tail 1", ["logs", "{pipe}", "--tail", "1"], never=["-> PENDING", "-> ADMITTED"]),
    Row("logs --since 1h", ["logs", "{pipe}", "--since", "1h"], ["PENDING -> ADMITTED"]),
    # -- tables written to a pipe keep every column (item 5) -----------------------------------
    Row(
        "simulate piped on a narrow COLUMNS",
        ["simulate", "tests/data/philly_excerpt.csv", "--limit", "20", "--gpus", "16"],
        ["p99 JCT (h)", "makespan (h)", "cluster eff", "preempt", "wall (s)", "η (statistical"],
        never=["…"],
        env={"COLUMNS": "60"},
    ),
    Row(
        "cluster piped on a narrow COLUMNS",
        ["cluster"],
        ["WORKERS (job/rank role, booked load)", "pipe/r3 stage 4/4"],
        never=["…"],
        env={"COLUMNS": "40"},
    ),
    Row(
        "list piped on a narrow COLUMNS",
        ["list"],
        ["PROGRESS", "PLAN", "pipeline 4 stages"],
        never=["…"],
        env={"COLUMNS": "40"},
    ),
    Row(
        "queue piped on a narrow COLUMNS",
        ["queue"],
        ["REASON", "needs 2 GPUs, 0 free, behind one (#1)"],
        never=["…"],
        env={"COLUMNS": "40"},
    ),
    Row(
        "models piped on a narrow COLUMNS",
        ["models"],
        ["η (SOURCE)", "hybrid 1.000 (no SPB)"],
        never=["…"],
        env={"COLUMNS": "40"},
    ),
    # -- the two memory figures say what each covers (item 4) -------------------------------
    Row(
        "dry run names the memory with and without the workspace",
        ["submit", "--dry-run", *MLP, "--workers", "2", "--parallelism", "data"],
        ["MEMORY (WITH WORKSPACE)", "MODEL MEMORY", "data x 2 workers", "max_workers       -"],
        never=["None"],
    ),
    Row(
        "dry run of an entrypoint says it is not checked",
        [
            "submit",
            "--dry-run",
            "--name",
            "ep",
            "--model",
            "mypkg.train:main",
            "--workers",
            "2",
            "--iterations",
            "5",
        ],
        ["the entrypoint mypkg.train:main is not checked", "blocks unknown until the workers"],
        never=["the spec is valid", "1 blocks"],
    ),
    Row(
        "dry run of one worker counts it in words",
        ["submit", "--dry-run", *MLP, "--workers", "1"],
        ["data x 1 worker "],
        never=["1 workers"],
    ),
]


def test_the_rows_are_unique() -> None:
    assert len({row.case for row in ROWS}) == len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.case)
def test_everyday_cli(cli: Cli, jobs: dict[str, str], row: Row) -> None:
    args = [arg.format(**jobs) for arg in row.args]
    result = cli(*args, **row.env)
    shown = result.stdout + result.stderr
    assert "Traceback" not in shown
    if row.error is not None:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2 and len(lines) == 1, shown
        assert row.error in lines[0], lines[0]
    else:
        assert result.returncode == 0, shown
    for text in row.says:
        assert text.format(**jobs) in result.stdout, (text, result.stdout)
    for text in row.never:
        assert text not in shown, (text, shown)


def test_submit_echoes_one_worker_and_the_plan_type(cli: Cli) -> None:
    one = cli("submit", "--name", "solo", "--model", "mlp", "--workers", "1", "--iterations", "1")
    assert ", 1 worker, 1 iteration, spb auto (PENDING)" in one.stdout, one
    pipeline = cli("submit", *PIPE, "--iterations", "5", "--parallelism", "pipeline")
    assert ", 4 workers, 5 iterations, parallelism pipeline (PENDING)" in pipeline.stdout
    chosen = cli("submit", *PIPE, "--iterations", "5")  # auto: the oracle picks the type
    assert "parallelism auto: pipeline (PENDING)" in chosen.stdout, chosen


def test_a_pipeline_with_a_low_eta_is_warned_about(cli: Cli) -> None:
    """At lr 0.05 2BW's one-step weight delay leaves digits_wide_mlp's pipeline η 0.04."""
    forced = cli(
        "submit", "--name", "slow", "--model", "digits_wide_mlp", "--workers", "4",
        "--iterations", "5", "--parallelism", "pipeline",
    )  # fmt: skip
    assert forced.returncode == 0, forced.stderr
    assert "warning: this pipeline plan's η is 0.04 (2BW's one-step weight delay)" in (
        forced.stderr
    )
    calm = cli("submit", *PIPE, "--iterations", "5", "--parallelism", "pipeline")  # lr 0.001
    assert calm.returncode == 0 and "warning" not in calm.stderr, calm.stderr


def test_logs_json_is_one_object_per_line(cli: Cli, jobs: dict[str, str]) -> None:
    result = cli("logs", jobs["pipe"], "--tail", "2", "-o", "json")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 2 and all({"seq", "at", "line"} <= set(line) for line in lines)
    assert lines[0]["seq"] < lines[1]["seq"]


def test_job_file_number_as_text_gives_file_and_line(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("name: a\nmodel: mlp\nworkers: 1\niterations: 5\nbatch_size: 1e3\n")
    result = cli("submit", "-f", str(path))
    assert result.returncode == 2
    assert f"job file {path}:5: field 'batch_size' must be an integer" in result.stderr
    assert "write 1000" in result.stderr


def test_cancel_by_state_and_all_confirm_with_a_count(cli: Cli, jobs: dict[str, str]) -> None:
    """Runs last in this module: it cancels the queue."""
    refused = cli("cancel", "--state", "PENDING")  # stdin is no terminal: it will not guess
    assert refused.returncode == 2 and "add --yes" in refused.stderr, refused
    assert "would cancel" in refused.stderr and " jobs of yours in PENDING" in refused.stderr
    assert json.loads(cli("status", jobs["one"], "-o", "json").stdout)["state"] == "PENDING"

    pending = cli("cancel", "--state", "pending", "--yes", "-o", "json")
    assert pending.returncode == 0, pending.stderr
    cancelled = {job["id"] for job in json.loads(pending.stdout)["items"]}
    assert {jobs["one"], jobs["two"]} <= cancelled
    assert f"cancelled {len(cancelled)} jobs of {len(cancelled)}" in pending.stderr
    assert json.loads(cli("status", jobs["pipe"], "-o", "json").stdout)["state"] == "RUNNING"

    everything = cli("cancel", "--all", "--yes")
    assert everything.returncode == 0, everything.stderr
    assert f"{jobs['pipe']} CANCELLED" in everything.stdout
    again = cli("cancel", "--all", "--yes")
    assert "nothing to cancel" in again.stderr and again.stdout == ""

    both = cli("cancel", jobs["pipe"], "--all")
    assert both.returncode == 2 and "not both" in both.stderr


def test_simulate_prints_yaml_and_names_the_rates_of_a_gavel_replay(cli: Cli) -> None:
    args = ["simulate", "tests/data/philly_excerpt.csv", "--limit", "5", "--gpus", "8"]
    as_yaml = cli(*args, "-o", "yaml")
    assert as_yaml.returncode == 0, as_yaml.stderr
    summary = yaml.safe_load(as_yaml.stdout)
    assert summary["policy"] == "jigsaw" and summary["jobs"] == 5
    gavel = cli("simulate", "tests/data/gavel_excerpt.trace", "--limit", "3", "--gpus", "8")
    assert gavel.returncode == 0, gavel.stderr
    assert "a Gavel trace without --throughputs: jobs run at the oracle's predicted rates" in (
        gavel.stderr
    )
