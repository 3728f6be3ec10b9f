"""Issue 16's "done means", end to end: under a per-worker memory limit the big zoo model
cannot run data parallel; submitted with ``parallelism: auto`` through ``jigsaw-cli submit``
to the service (SQLite, local Ray with 4 logical GPUs, the real Ray executor), the oracle
gives it a pipeline or hybrid plan, the gang trains on digits and the job reaches SUCCEEDED.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.local_cluster import run_cli as cli
from tests.runtime.local_cluster import service_on_local_ray

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.ray, pytest.mark.timeout(900)]

LIMIT_GIB = 0.25
WIDE = [
    "--name",
    "wide",
    "--model",
    "digits_wide_mlp",
    "--workers",
    "4",
    "--iterations",
    "40",
    "--learning-rate",
    "0.01",
]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    settings = {
        "JIGSAW_GPUS": "4",
        "JIGSAW_WORKER_MEMORY_GIB": str(LIMIT_GIB),
        "JIGSAW_POLICY": "las",
        "JIGSAW_ROUND_SECONDS": "0.5",
    }
    with service_on_local_ray(tmp_path_factory.mktemp("service"), settings) as env:
        yield env


def job_of(env: dict[str, str], job_id: str) -> dict[str, Any]:
    done = cli(env, "describe", job_id, "-o", "json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout)["job"])


def test_the_big_model_runs_to_success_under_parallelism_auto(service: dict[str, str]) -> None:
    # Data parallelism is refused at submit, in one line naming the limit.
    refused = cli(service, "submit", *WIDE, "--parallelism", "data")
    assert refused.returncode != 0
    assert "JIGSAW_WORKER_MEMORY_GIB" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr

    dry = cli(service, "submit", *WIDE, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "parallelism auto: runs " in dry.stdout and "over the 0.25 GiB limit" in dry.stdout
    # A row's first column is "*" on the chosen alternative, else empty: the kind is the
    # first word of the row that is not "*".
    rows = {
        words[1] if words[0] == "*" else words[0]
        for words in (line.split() for line in dry.stdout.splitlines())
        if words and words[0] in ("data", "pipeline", "hybrid", "*")
    }
    assert {"data", "pipeline", "hybrid"} <= rows, dry.stdout

    submitted = cli(service, "submit", *WIDE, "-o", "json")
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["id"]
    # One CLI process follows the job (polling every second) instead of a CLI start every
    # few seconds competing with the gang for the two cores.
    watched = cli(service, "status", job_id, "--watch", "-o", "json", timeout=600)
    log = Path(service["log"]).read_text(errors="replace")[-3000:]
    job = job_of(service, job_id)
    assert job["state"] == "SUCCEEDED", (job, watched.stderr[-2000:], log)
    assert watched.returncode == 0 and json.loads(watched.stdout)["state"] == "SUCCEEDED"
    assert job["plan_kind"] in ("pipeline", "hybrid"), job
    assert job["plan_types"]["chosen"] == job["plan_kind"]
    assert job["iterations_done"] == 40
    described = cli(service, "describe", job_id)
    assert "Plan type (oracle prediction per alternative)" in described.stdout
    logs = cli(service, "logs", job_id)
    finished = next(line for line in logs.stdout.splitlines() if "finished at 40/40" in line)
    accuracy = json.loads(finished[finished.index("{") :])["accuracy"]
    assert accuracy > 0.4, finished  # chance is 0.1
