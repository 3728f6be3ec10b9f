"""Issue 23's "done means", end to end: an elastic job submitted with ``jigsaw-cli submit`` to
the service (SQLite, local Ray with 4 logical GPUs, the real Ray executor, the jigsaw policy)
grows into the free GPUs, shrinks to ``min_workers`` when another job arrives, grows again,
and reaches SUCCEEDED with its held-out accuracy; every resize is an event with its reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.local_cluster import run_cli as cli
from tests.runtime.local_cluster import service_on_local_ray

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.ray, pytest.mark.timeout(900)]

ELASTIC = [
    "--name", "elastic", "--model", "mlp", "--spb", "none", "--workers", "2",
    "--min-workers", "1", "--max-workers", "4", "--batch-size", "24", "--iterations", "3000",
]  # fmt: skip
OTHER = ["--name", "other", "--model", "mlp", "--workers", "2", "--iterations", "100"]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    settings = {
        "JIGSAW_GPUS": "4",
        "JIGSAW_POLICY": "jigsaw",
        "JIGSAW_ROUND_SECONDS": "0.5",
        "JIGSAW_LEASE_ITERATIONS": "20",
        "JIGSAW_CONTROL_EVERY": "10",
        # The MLP is launch-bound in the oracle (36.2 it/s on 1 worker, 35.5 on 4 at the same
        # global batch): growing it saves nothing, so the priced rule keeps its size
        # (tests/core/policies/test_priced_elastic_rule.py). This test runs the mechanism.
        "JIGSAW_POLICY_OPTIONS": '{"config": {"resize_priced": false}}',
    }
    with service_on_local_ray(tmp_path_factory.mktemp("service"), settings) as env:
        yield env


def described(env: dict[str, str], job_id: str) -> dict[str, Any]:
    done = cli(env, "describe", job_id, "-o", "json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def wait_for(
    env: dict[str, str], job_id: str, done: Callable[[dict[str, Any]], bool], timeout_s: float
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        seen = described(env, job_id)
        if done(seen):
            return seen
        if time.monotonic() > deadline:
            log = Path(env["log"]).read_text(errors="replace")[-3000:]
            raise AssertionError(f"timed out: {seen['job']} {seen['events']} {log}")
        time.sleep(1.0)


def resizes(seen: dict[str, Any]) -> list[str]:
    return [e["reason"] for e in seen["events"] if e["code"] == "Running/Resized"]


def test_an_elastic_job_grows_shrinks_for_a_newcomer_and_succeeds(
    service: dict[str, str],
) -> None:
    submitted = cli(service, "submit", *ELASTIC, "-o", "json")
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["id"]
    grown = wait_for(service, job_id, lambda s: s["job"]["current_workers"] == 4, 300)
    assert "2 -> 4 workers into GPUs nobody waits for" in resizes(grown)[0]
    assert grown["job"]["worker_batch"] == 12 and grown["job"]["global_batch"] == 48

    other = cli(service, "submit", *OTHER, "-o", "json")
    assert other.returncode == 0, other.stderr
    other_id = json.loads(other.stdout)["id"]
    shrunk = wait_for(service, job_id, lambda s: any("-> 1 workers" in r for r in resizes(s)), 300)
    shrink = next(r for r in resizes(shrunk) if "-> 1 workers" in r)
    assert f"{other_id} first: back to min_workers" in shrink

    watched = cli(service, "status", job_id, other_id, "--watch", "-o", "json", timeout=600)
    final = described(service, job_id)
    assert final["job"]["state"] == "SUCCEEDED", (final["job"], watched.stderr[-2000:])
    assert described(service, other_id)["job"]["state"] == "SUCCEEDED"
    assert final["job"]["iterations_done"] == 3000
    # It grew back once the newcomer started on the GPUs it gave up or finished.
    assert len(resizes(final)) >= 3, resizes(final)
    text = cli(service, "describe", job_id).stdout
    assert "Resizes" in text and "elastic 1..4 workers, batch fixed" in text
    logs = cli(service, "logs", job_id)
    finished = next(line for line in logs.stdout.splitlines() if "finished at 3000/3000" in line)
    accuracy = json.loads(finished[finished.index("{") :])["accuracy"]
    assert accuracy > 0.9, finished  # held-out digits; chance is 0.1
