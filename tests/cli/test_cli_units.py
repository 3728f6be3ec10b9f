"""The pure parts of the CLI: configuration, job files, error mapping and formatting."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from cli.config import DEFAULT_URL, load_config
from cli.elastic_views import size_cell
from cli.errors import EXIT_FAILURE, EXIT_USAGE, ApiError, UsageError
from cli.formatting import depth_bar, format_bytes, format_duration, format_time
from cli.jobfile import read_job_file, resolve_spec
from cli.views import plan_changes


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("JIGSAW_URL", raising=False)
    monkeypatch.delenv("JIGSAW_TOKEN", raising=False)
    (tmp_path / "jigsaw").mkdir()
    return tmp_path / "jigsaw" / "config.toml"


def test_config_defaults_without_file_or_env(config_home: Path) -> None:
    config = load_config()
    assert (config.url, config.token) == (DEFAULT_URL, None)


def test_environment_overrides_the_config_file(
    config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_home.write_text('url = "http://file:1/"\ntoken = "from-file"\n')
    assert (load_config().url, load_config().token) == ("http://file:1", "from-file")
    monkeypatch.setenv("JIGSAW_TOKEN", "from-env")
    monkeypatch.setenv("JIGSAW_URL", "http://env:2")
    config = load_config()
    assert (config.url, config.token, config.source) == ("http://env:2", "from-env", "JIGSAW_TOKEN")


@pytest.mark.parametrize("text", ["url = [unclosed", "token = 42\n"])
def test_a_broken_config_file_is_a_usage_error(config_home: Path, text: str) -> None:
    config_home.write_text(text)
    with pytest.raises(UsageError, match="config"):
        load_config()


def test_flags_override_file_values_and_plan_lists_become_strings() -> None:
    file_values = {"name": "f", "model": "m", "workers": 4, "iterations": 9, "spb": [0, 1, 1, 2]}
    spec = resolve_spec(file_values, {"workers": 2, "name": None, "seed": 3})
    assert spec == {
        "name": "f",
        "model": "m",
        "workers": 2,
        "iterations": 9,
        "spb": "0,1,1,2",
        "seed": 3,
    }


def test_missing_required_fields_are_named() -> None:
    with pytest.raises(UsageError, match="--model, --iterations"):
        resolve_spec({"name": "x"}, {"workers": 1})


def test_job_files_must_hold_a_mapping(tmp_path: Path) -> None:
    listed = tmp_path / "list.yaml"
    listed.write_text("- name: x\n")
    with pytest.raises(UsageError, match="mapping"):
        read_job_file(str(listed))
    broken = tmp_path / "job.json"
    broken.write_text('{"name": ')
    with pytest.raises(UsageError, match="not valid JSON"):
        read_job_file(str(broken))
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(UsageError, match="empty"):
        read_job_file(str(empty))


def test_api_errors_map_4xx_to_usage_and_5xx_to_failure() -> None:
    invalid = ApiError(
        422, "must be at least 1", {"detail": "must be at least 1", "field": "workers"}
    )
    assert invalid.exit_code == EXIT_USAGE
    assert str(invalid) == "must be at least 1 (field: workers)"
    named = ApiError(422, "workers must be at least 1", {"field": "workers"})
    assert str(named) == "workers must be at least 1"
    assert ApiError(503, "database down", {}).exit_code == EXIT_FAILURE


def test_human_formats() -> None:
    assert format_duration(4.25) == "4.2s"
    assert format_duration(75) == "1m15s"
    assert format_duration(3 * 3600 + 60) == "3h01m"
    assert format_duration(None) == "-"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 * 2**30) == "3.0 GiB"
    assert depth_bar(1, 4) == "·███"
    assert format_time("2026-11-22T07:00:05.123Z") == "2026-11-22 07:00:05Z"
    assert format_time(None) == "-"


def test_plan_history_keeps_only_changes() -> None:
    samples = [
        {"iteration": i, "plan": plan}
        for i, plan in enumerate([[0, 0], [0, 0], [0, 1], [0, 1], [], [0, 0]])
    ]
    assert [s["iteration"] for s in plan_changes(samples)] == [0, 2, 5]


def test_queue_table_says_why_a_blocked_job_never_starts() -> None:
    from rich.console import Console

    from cli.views import queue_table

    items = [
        {
            "position": 1,
            "job_id": "j-1",
            "name": "big",
            "user": "u",
            "estimated_start_at": None,
            "estimated_wait_s": None,
            "blocked": "needs 5 GPUs; the cluster has 4 alive",
        },
        {
            "position": 2,
            "job_id": "j-2",
            "name": "small",
            "user": "u",
            "estimated_start_at": "2026-11-22T07:00:00.000Z",
            "estimated_wait_s": 30.0,
            "blocked": None,
        },
    ]
    console = Console(width=200, record=True)
    console.print(queue_table(items))
    text = console.export_text()
    big, small = (line for line in text.splitlines() if "j-1" in line or "j-2" in line)
    assert "never" in big and "needs 5 GPUs; the cluster has 4 alive" in big
    assert "never" not in small and "30s" in small


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("10m", 600), ("2h", 7200), ("1d", 86400), ("1h30m", 5400), ("90", 90)],
)
def test_durations_as_people_type_them(text: str, seconds: float) -> None:
    from cli.durations import parse_duration

    assert parse_duration(text, "--since") == seconds


@pytest.mark.parametrize("text", ["yesterday", "-5m", "nan", "inf", "5 minutes", "m5"])
def test_a_non_duration_names_the_flag(text: str) -> None:
    from cli.durations import parse_duration

    with pytest.raises(UsageError, match="--since"):
        parse_duration(text, "--since")


@pytest.mark.parametrize(
    ("status", "body", "detail", "said"),
    [
        (404, {"job_id": "j-x"}, "no job with id 'j-x'; list your jobs with GET /api/v1/jobs",
         "no job with id 'j-x'; `jigsaw-cli list` shows your jobs"),
        (422, {"field": "state"}, "query parameter 'state': Input should be 'PENDING'",
         "--state: Input should be 'PENDING'"),
        (422, {"field": "gpus"}, "unknown field 'gpus'; remove it (see the schema at /docs)",
         "unknown field 'gpus'; remove it (the fields are the flags of "
         "`jigsaw-cli submit --help`, with _ for -)"),
        (422, {"field": "workers"}, "field 'workers': must be in 1..1024",
         "field 'workers': must be in 1..1024"),
        (404, {}, "no such route; the API lives under /api/v1 (see /docs)",
         "the server does not know this request: it is older than this jigsaw-cli"),
        (422, {"field": "scopes.0"}, "field 'scopes.0': Input should be 'admin', 'user'",
         "--scope: Input should be 'admin', 'user'"),
        (403, {}, "this route needs a token with scope admin; yours has user",
         "this command needs a token with scope admin; yours has user"),
    ],
)  # fmt: skip
def test_server_errors_in_the_clis_words(
    status: int, body: dict[str, str], detail: str, said: str
) -> None:
    from cli.api_words import cli_detail

    assert cli_detail(status, body, detail, {"state": "--state", "scopes": "--scope"}) == said


@pytest.mark.parametrize(
    ("field", "given", "said"),
    [
        ("spb", {"spb"}, "--spb: unknown plan 'x'"),
        ("spb", set(), "job file job.yaml:5: field 'spb': unknown plan 'x'"),
        ("spb.0", set(), "job file job.yaml:5: field 'spb.0': unknown plan 'x'"),
        ("batch_size", {"batch_size"}, "field 'spb': unknown plan 'x'"),
        ("model", set(), "field 'spb': unknown plan 'x'"),
        (None, {"spb"}, "field 'spb': unknown plan 'x'"),
    ],
    ids=["flag", "file", "file, nested", "other flag", "not in the file", "no field"],
)
def test_a_refused_spec_field_is_said_where_it_was_written(
    field: str | None, given: set[str], said: str
) -> None:
    from cli.api_words import spec_in_user_words

    where = {"spb": "job.yaml:5", "name": "job.yaml:1"}
    detail = (
        "field 'spb.0': unknown plan 'x'" if field == "spb.0" else "field 'spb': unknown plan 'x'"
    )
    assert spec_in_user_words(detail, field, given, where) == said


def test_watch_says_time_left_not_eta() -> None:
    from cli.watch import WatchedJob, plain_line

    watched = WatchedJob(
        "j-1",
        job={"state": "RUNNING", "iterations": 100, "iterations_done": 40, "plan": [0, 1]},
        rate=10.0,
    )
    line = plain_line(watched)
    assert "left 6.0s" in line and "ETA" not in line and "plan 0,1" in line


def _gpu(load: float, *workers: tuple[str, float]) -> dict[str, object]:
    return {
        "id": [0, 0],
        "load": load,
        "memory_used_bytes": 2**30,
        "memory_bytes": 16 * 2**30,
        "workers": [
            {"job_id": f"j-{job}", "job_name": job, "rank": 0, "depth": 0, "predicted_load": share}
            for job, share in workers
        ],
    }


@pytest.mark.parametrize(
    ("sharing", "gpu", "says", "never"),
    [
        ("timeslice", _gpu(0.6, ("a", 0.6)), ["60%", "a/r0 d=0"], ["sliced", "taking turns"]),
        (
            "timeslice",
            _gpu(0.9, ("a", 0.5), ("b", 0.4)),
            [" 90%", "a/r0 d=0 50%", "◆ shared"],
            ["sliced"],
        ),
        (
            "timeslice",
            _gpu(1.98, ("host", 1.0), ("guest", 0.98)),
            ["100% sliced", "host/r0 d=0 100%", "GPU 0:0 has 2 jobs taking turns (booked 198%)"],
            ["198% ", "198%\n", "198% sliced", "at once"],
        ),
        (
            "timeslice",
            _gpu(1.5, ("a", 0.5), ("b", 0.4), ("c", 0.6)),
            ["100% sliced", "has 3 jobs taking turns (booked 150%)"],
            ["150% "],
        ),
        (
            "concurrent",
            _gpu(1.98, ("host", 1.0), ("guest", 0.98)),
            ["100% at once", "concurrent: GPU 0:0 has 2 jobs running at once (booked 198%)"],
            ["sliced", "take turns", "taking turns"],
        ),
    ],
    ids=[
        "alone",
        "shared in space",
        "two jobs time-sliced",
        "three jobs time-sliced",
        "two jobs at once (JIGSAW_SHARING=concurrent)",
    ],
)
def test_cluster_load_never_reads_over_100_percent(
    sharing: str, gpu: dict[str, object], says: list[str], never: list[str]
) -> None:
    """A GPU booked over all its time reads 100%, and the footnote says who shares it and how
    (turns, or at once under JIGSAW_SHARING=concurrent), not '198%' (issue 25)."""
    from rich.console import Console

    from cli.cluster_views import cluster_view

    console = Console(width=300, record=True)
    console.print(cluster_view({"nodes": [], "gpus": [gpu], "sharing": sharing}))
    text = console.export_text()
    for part in says:
        assert part in text, (part, text)
    for part in never:
        assert part not in text, (part, text)


PIPELINE_DETAIL = {
    "kind": "pipeline",
    "num_blocks": 4,
    "stages": [[1, 1], [2, 4]],
    "micro_batches": 16,
    "replicas": 1,
    "schedule": "2bw",
}


TWO_BW_ETA = {
    "plan": "pipeline[2bw] stages 1,2-4 x 1 replica, 16 micro-batches",
    "depths": [],
    "eta": 0.9907281442451704,
    "source": "2BW's one-step weight delay: the 2BW efficiency model at lr 0.001, momentum 0.9; "
    "no SPB",
}
HYBRID_ETA = {
    "plan": "hybrid x 2 workers, sharded blocks 1:column",
    "depths": [],
    "eta": 1.0,
    "source": "no SPB: every block's gradient averages the whole batch",
}


def _job(state: str, **fields: object) -> dict[str, object]:
    return {"id": "j-1", "state": state, "iterations": 5, "iterations_done": 5, **fields}


@pytest.mark.parametrize(
    ("job", "says", "never"),
    [
        (
            _job("SUCCEEDED", plan=[], plan_kind="pipeline", plan_detail=PIPELINE_DETAIL,
                 eta={"current": TWO_BW_ETA, "candidates": []}),
            ["pipeline[2bw] stages 1,2-4 x 1 replica, 16 micro-batches",
             "0.991 (2BW's one-step weight delay: the 2BW efficiency model at lr 0.001"],
            ["SPB plan", "no plan yet", "Eta", "1.000", "no SPB:"],
        ),
        (
            _job("PENDING", plan=[], plan_kind=None, plan_types={"chosen": "hybrid"},
                 eta={"current": None, "candidates": [HYBRID_ETA]}),
            ["not started; the oracle chose hybrid", "1.000 (no SPB: every block's"],
            ["SPB plan", "no plan yet"],
        ),
        (
            _job("PENDING", plan=[], plan_kind=None, plan_types={"chosen": "pipeline"},
                 eta={"current": None, "candidates": [TWO_BW_ETA]}),
            ["not started; the oracle chose pipeline", "0.991 (2BW's one-step weight delay"],
            ["SPB plan", "no plan yet"],
        ),
        (
            # A server that gives a pending job no η for its plan type: none is made up.
            _job("PENDING", plan=[], plan_kind=None, plan_types={"chosen": "hybrid"}),
            ["not started; the oracle chose hybrid", "η          -"],
            ["1.000", "no SPB"],
        ),
        (
            _job("RUNNING", plan=[0, 1], plan_kind="data", eta={"current": {"eta": 0.9,
                 "source": "prior"}}),
            ["data parallel, SPB stop depths 0,1", "0.900 (prior"],
            ["no SPB"],
        ),
    ],
    ids=[
        "pipeline after it succeeded",
        "hybrid chosen, pending",
        "2bw pipeline chosen, pending",
        "hybrid chosen, no eta from the server",
        "data parallel running",
    ],
)  # fmt: skip
def test_status_names_every_plan_type_and_its_eta(
    job: dict[str, object], says: list[str], never: list[str]
) -> None:
    from rich.console import Console

    from cli.views import job_summary

    console = Console(width=300, record=True)
    console.print(job_summary(job))
    text = console.export_text()
    for part in says:
        assert part in text, (part, text)
    for part in never:
        assert part not in text, (part, text)


def _rendered(renderable: object) -> str:
    from rich.console import Console

    console = Console(width=400, record=True)
    console.print(renderable)
    return console.export_text()


def test_describe_gives_a_pipeline_its_servers_eta_not_an_spb_table() -> None:
    from cli.views import eta_table

    running = _job(
        "RUNNING",
        plan=[],
        plan_kind="pipeline",
        plan_detail=PIPELINE_DETAIL,
        eta={"current": TWO_BW_ETA, "candidates": []},
    )
    text = _rendered(eta_table(running))
    assert "0.991 for this pipeline plan (2BW's one-step weight delay: the 2BW" in text
    assert "DEPTHS" not in text and "1.000" not in text
    pending = _job(
        "PENDING",
        plan=[],
        plan_kind=None,
        plan_types={"chosen": "hybrid"},
        eta={"current": None, "candidates": [HYBRID_ETA]},
    )
    assert "1.000 for the hybrid plan (no SPB: every block's" in _rendered(eta_table(pending))


def test_models_gives_each_plan_types_eta_and_its_source_once() -> None:
    from cli.cluster_views import models_table

    def fit(kind: str, eta: float, source: str) -> dict[str, object]:
        return {
            "kind": kind,
            "fits": True,
            "chosen": kind == "hybrid",
            "eta": eta,
            "eta_source": source,
            "max_worker_memory_bytes": 2**20,
        }

    two_bw = str(TWO_BW_ETA["source"]).replace("0.001", "0.05")
    model = {
        "name": "mlp",
        "num_blocks": 4,
        "parameters": 42_600,
        "profile": "measured",
        "plan_types": [
            fit("data", 0.912, "measured"),
            fit("pipeline", 0.2473, two_bw),
            fit("pipeline", 0.2473, two_bw),  # another stage count: the same η
            fit("hybrid", 1.0, str(HYBRID_ETA["source"])),
        ],
    }
    listing = {
        "workers": 4,
        "batch_size": 32,
        "memory_limit_bytes": 2**30,
        "gpu_type": "v100",
        "items": [model, {**model, "name": "digits_cnn"}],
    }
    text = _rendered(models_table(listing))
    row = next(line for line in text.splitlines() if line.startswith("mlp"))
    assert row.rstrip().endswith(
        "staircase 0.912 (measured); pipeline 0.247 (2BW's one-step weight delay); "
        "hybrid 1.000 (no SPB)"
    ), row
    lines = [line.rstrip() for line in text.splitlines()]
    assert lines.count(two_bw) == 1, text  # each shortened source whole, once, under the table
    assert lines.count(str(HYBRID_ETA["source"])) == 1, text
    assert "lr 0.05, momentum 0.9" in text and "pipeline/hybrid 1" not in text


def _command_paths() -> list[list[str]]:
    import typer

    from cli.main import app

    def walk(command: Any, path: list[str]) -> list[list[str]]:
        if hasattr(command, "commands"):  # a group (Typer vendors its own Click)
            return [p for name, sub in command.commands.items() for p in walk(sub, [*path, name])]
        return [path]

    return walk(typer.main.get_command(app), [])


@pytest.mark.parametrize("path", _command_paths(), ids=" ".join)
def test_help_shows_no_value_on_a_flag(path: list[str]) -> None:
    """Every verb's help lists its on/off flags without a value they do not take (issue 25:
    ``--watch <bool>``)."""
    import typer
    from typer.testing import CliRunner

    from cli.main import app

    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output and "BOOLEAN" not in result.output, result.output
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    for flag in (p for p in command.params if getattr(p, "is_flag", False)):
        long = next(opt for opt in flag.opts if opt.startswith("--"))
        listed = re.compile(rf"^\s+(?:-\w, )?{re.escape(long)}(?:\s|$)")
        shown = [line for line in result.output.splitlines() if listed.match(line)]
        assert len(shown) == 1 and f"{long} <" not in shown[0], (long, result.output)


def test_size_shows_the_running_size_then_the_initial_one() -> None:
    spec = {"workers": 2, "batch_size": 24, "min_workers": 1, "max_workers": 4}
    running = {"spec": spec, "current_workers": 4, "worker_batch": 12}
    assert size_cell(running) == (
        "4 workers x 12 = global batch 48; elastic 1..4 workers, batch fixed"
    )
    # Finished: no current size; the last per-worker batch (12) is not the initial one (24).
    finished = {"spec": spec, "current_workers": None, "worker_batch": 12}
    assert size_cell(finished).startswith("2 workers x 24 = global batch 48 (initial)")
