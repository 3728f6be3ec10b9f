"""``list``, ``queue``, ``status`` and ``describe`` answer what a Slurm or kubectl user asks
first (issue 30, items 1-4): the newest job is listed first, even after 50; the queue is in the
policy's order (priority first) with its estimates from that order; a waiting job says where it
stands and why in every view, in the queue's words; an elastic job says why it keeps its size.

The server runs ``las`` on 2 GPUs. A priority-1000 job holds both GPUs for good (nothing
outranks it, so nothing preempts it); the rest wait behind it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import Cli, ServerProcess, base_env, start_embedded_server, stop

pytestmark = pytest.mark.integration

WAITERS = ("q1", "q2", "q3")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_embedded_server(
        tmp_path_factory.mktemp("queue-list"), JIGSAW_POLICY="las", JIGSAW_GPUS="2"
    )
    yield server
    stop(server)


@pytest.fixture
def cli(server: ServerProcess, tmp_path: Path) -> Cli:
    env = base_env(tmp_path)
    env.update(JIGSAW_URL=server.url, JIGSAW_TOKEN=server.admin_token)
    return Cli(env)


def submit(server: ServerProcess, name: str, **fields: object) -> str:
    body = {"name": name, "model": "mlp", "workers": 1, "iterations": 50, **fields}
    response = httpx.post(
        f"{server.url}/api/v1/jobs",
        json=body,
        headers={"Authorization": f"Bearer {server.admin_token}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@pytest.fixture(scope="module")
def jobs(server: ServerProcess) -> dict[str, str]:
    """The hog (running), three jobs waiting in arrival order, then an urgent one (priority
    100), submitted last."""
    hog = submit(server, "hog", workers=2, iterations=10**8, priority=1000)
    deadline = time.monotonic() + 60
    headers = {"Authorization": f"Bearer {server.admin_token}"}
    while httpx.get(f"{server.url}/api/v1/jobs/{hog}", headers=headers).json()["state"] != (
        "RUNNING"
    ):
        assert time.monotonic() < deadline, "the hog never started"
        time.sleep(0.2)
    ids = {"hog": hog}
    for name in WAITERS:
        ids[name] = submit(server, name)
        time.sleep(0.01)  # distinct submission times
    ids["urgent"] = submit(server, "urgent", priority=100)
    return ids


def test_queue_is_in_the_policys_order_priority_first(cli: Cli, jobs: dict[str, str]) -> None:
    result = cli("queue", "-o", "json")
    assert result.returncode == 0, result.stderr
    items = json.loads(result.stdout)["items"]
    assert [item["name"] for item in items] == ["urgent", "q1", "q2", "q3"]
    assert [item["position"] for item in items] == [1, 2, 3, 4]
    # Estimates follow that order: nobody starts before the job ahead of it.
    waits = [item["estimated_wait_s"] for item in items]
    assert waits == sorted(waits), waits
    table = cli("queue")
    assert "las: priority, then least attained service" in table.stdout + table.stderr
    assert "needs 1 GPU, 0 free, behind urgent (#1)" in table.stdout


def test_a_waiting_job_says_where_it_stands_in_every_view(cli: Cli, jobs: dict[str, str]) -> None:
    queued = {item["name"]: item for item in json.loads(cli("queue", "-o", "json").stdout)["items"]}
    reason = queued["q2"]["reason"]
    assert reason == "needs 1 GPU, 0 free, behind q1 (#2)"

    status = cli("status", jobs["q2"])
    assert status.returncode == 0, status.stderr
    assert "Waiting" in status.stdout and "#3, est. start in " in status.stdout
    assert reason in status.stdout
    assert json.loads(cli("status", jobs["q2"], "-o", "json").stdout)["waiting"]["reason"] == (
        reason
    )

    describe = cli("describe", jobs["q2"])
    assert reason in describe.stdout and "#3" in describe.stdout
    assert "see describe" not in describe.stdout

    wide = cli("list", "-o", "wide", "--name", "q*")
    assert wide.returncode == 0, wide.stderr
    assert "WAITING" in wide.stdout and reason in wide.stdout
    assert "#2, est. start in" in wide.stdout  # q1, behind urgent (not named q*)


def test_watch_of_a_waiting_job_prints_its_place(cli: Cli, jobs: dict[str, str]) -> None:
    process = cli.popen("status", jobs["q3"], "--watch")
    try:
        time.sleep(4)
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=15)
    assert "q3" in stderr and "#4, est. start in" in stderr, stderr
    assert "behind q2 (#3)" in stderr, stderr


def test_list_is_newest_first_and_a_new_job_shows_after_fifty(
    server: ServerProcess, cli: Cli, jobs: dict[str, str]
) -> None:
    for index in range(50):
        submit(server, f"bulk-{index}", iterations=5)
    newest = submit(server, "newest", iterations=5)
    plain = cli("list", "-o", "json")
    items = json.loads(plain.stdout)["items"]
    assert len(items) == 50 and items[0]["id"] == newest
    assert newest in cli("list").stdout

    second = json.loads(cli("list", "--limit", "2", "--offset", "1", "-o", "json").stdout)
    assert [item["name"] for item in second["items"]] == ["bulk-49", "bulk-48"]
    oldest = json.loads(cli("list", "--reverse", "--limit", "1", "-o", "json").stdout)
    assert oldest["items"][0]["id"] == jobs["hog"]
    by_priority = json.loads(cli("list", "--sort", "priority", "--limit", "2", "-o", "json").stdout)
    assert [item["name"] for item in by_priority["items"]] == ["hog", "urgent"]

    named = json.loads(cli("list", "--name", "Q2", "-o", "json").stdout)
    assert [item["id"] for item in named["items"]] == [jobs["q2"]]
    recent = json.loads(cli("list", "--since", "1h", "--name", "bulk-*", "-o", "json").stdout)
    assert recent["total"] == 50
    none_yet = json.loads(cli("list", "--since", "2099-01-01", "-o", "json").stdout)
    assert none_yet["total"] == 0


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--sort", "age"], "--sort 'age' is not a sort key; choose from submitted, name"),
        (["--since", "yesterday"], "--since 'yesterday' is neither a duration"),
        (["--offset", "-1"], "--offset"),
    ],
)
def test_list_refuses_bad_flags_in_one_line(cli: Cli, args: list[str], says: str) -> None:
    result = cli("list", *args)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert says in result.stderr, result.stderr


def test_describe_of_an_elastic_job_says_why_it_keeps_its_size(
    server: ServerProcess, cli: Cli, jobs: dict[str, str]
) -> None:
    elastic = submit(server, "stretchy", min_workers=1, max_workers=2, batch_size=32)
    describe = cli("describe", elastic)
    assert describe.returncode == 0, describe.stderr
    assert "never resized:" in describe.stdout
    assert "the policy las does not resize jobs" in describe.stdout, describe.stdout


def test_status_of_a_running_job_gives_its_rate_and_time_left(
    cli: Cli, jobs: dict[str, str]
) -> None:
    deadline = time.monotonic() + 30
    while "it/s, " not in (shown := cli("status", "hog").stdout):  # by name
        assert time.monotonic() < deadline, shown
        time.sleep(0.5)
    progress = next(line for line in shown.splitlines() if line.startswith("Progress"))
    assert " left" in progress and "d" in progress.split("it/s, ")[1], progress  # days left


def test_list_watch_prints_a_line_per_change(
    server: ServerProcess, cli: Cli, jobs: dict[str, str]
) -> None:
    """Last in the module: it cancels q1."""
    process = cli.popen("list", "--name", "q*", "-w")
    assert process.stdout is not None
    guard = threading.Timer(60, process.kill)  # a missing line fails the test, never hangs it
    guard.start()
    try:
        table = [process.stdout.readline() for _ in range(4)]  # the header and q3, q2, q1
        assert jobs["q1"] in table[3] and "PENDING" in table[3], table
        response = httpx.post(
            f"{server.url}/api/v1/jobs/{jobs['q1']}/cancel",
            headers={"Authorization": f"Bearer {server.admin_token}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        change = process.stdout.readline()
    finally:
        guard.cancel()
        process.terminate()
        process.communicate(timeout=15)
    assert change.startswith(jobs["q1"]) and "CANCELLED" in change, change
    assert "cancelled by admin" in change, change
