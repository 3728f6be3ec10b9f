"""``--parallelism`` and the plan-type view end to end: the real CLI as a subprocess against
a real server whose per-worker memory limit (``JIGSAW_WORKER_MEMORY_GIB``) is below what
vgg16_32_fc needs under data parallelism at 2 workers, batch 32 (priced as a v100)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigsaw.model.domain import JobSpec
from jigsaw.model.hardware import preset
from jigsaw.model.numerics import GIB
from jigsaw.planning.planner import Planner
from tests.cli.conftest import (
    Cli,
    ServerProcess,
    base_env,
    one_line_error,
    start_embedded_server,
    stop,
)

pytestmark = pytest.mark.integration

VGG = ["--name", "big", "--model", "vgg16_32_fc", "--workers", "2", "--iterations", "5"]


def tight_limit_gib() -> float:
    choice = Planner(preset("v100")).plan_choice(
        JobSpec(name="big", model="vgg16_32_fc", workers=2, iterations=5)
    )
    assert choice is not None
    data = choice.alternatives[0].prediction.max_model_bytes
    smallest = min(a.prediction.max_model_bytes for a in choice.alternatives[1:])
    return (smallest + data) / 2 / GIB


@pytest.fixture(scope="module")
def tight_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_embedded_server(
        tmp_path_factory.mktemp("tight-server"),
        JIGSAW_WORKER_MEMORY_GIB=f"{tight_limit_gib():.6f}",
    )
    yield server
    stop(server)


@pytest.fixture
def cli(tight_server: ServerProcess, tmp_path: Path) -> Cli:
    env = base_env(tmp_path)
    env["JIGSAW_URL"] = tight_server.url
    env["JIGSAW_TOKEN"] = tight_server.admin_token
    return Cli(env)


def test_dry_run_shows_the_chosen_type_and_every_alternative(cli: Cli) -> None:
    result = cli("submit", *VGG, "--dry-run", "-o", "json")
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    types = body["plan_types"]
    assert types["chosen"] in ("pipeline", "hybrid") and body["plan_kind"] == types["chosen"]
    assert [a["fits"] for a in types["alternatives"] if a["kind"] == "data"] == [False]
    table = cli("submit", *VGG, "--dry-run")
    assert table.returncode == 0, table.stderr
    for text in ("Plan types", "SAMPLES/S", "MODEL MEMORY", "FITS", "data x 2 workers"):
        assert text in table.stdout, table.stdout
    assert f"runs {types['chosen']}" in table.stdout


def test_describe_shows_the_plan_types_of_a_submitted_job(cli: Cli) -> None:
    submitted = cli("submit", *VGG, "--parallelism", "auto", "-o", "json")
    assert submitted.returncode == 0, submitted.stderr
    job = json.loads(submitted.stdout)
    described = cli("describe", job["id"])
    assert described.returncode == 0, described.stderr
    assert "Plan type" in described.stdout and "hybrid" in described.stdout


def test_a_job_file_may_ask_for_a_type(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: f\nmodel: vgg16_32_fc\nworkers: 2\niterations: 5\nparallelism: pipeline\n"
    )
    result = cli("submit", "-f", str(path), "--dry-run", "-o", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["plan_kind"] == "pipeline"


@pytest.mark.parametrize(
    "extra,says",
    [
        (["--parallelism", "tensor"], "parallelism"),
        (["--parallelism", "pipeline", "--spb", "staircase"], "spb"),
        (["--parallelism", "data"], "JIGSAW_WORKER_MEMORY_GIB"),
    ],
    ids=["unknown", "spb-on-pipeline", "data-over-the-limit"],
)
def test_bad_parallelism_is_one_line_and_a_non_zero_exit(
    cli: Cli, extra: list[str], says: str
) -> None:
    result = cli("submit", *VGG, *extra)
    assert result.returncode != 0
    assert says in one_line_error(result.stderr)
