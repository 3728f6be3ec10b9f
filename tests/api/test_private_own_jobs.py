"""JIGSAW_PRIVATE_JOBS inside a user's own job: what it says about another user's job (its
reason, ``preempted_by``, events, logs; so ``describe``, ``logs`` and the dashboard) names
that job only by its alias. Two users, real scheduling rounds with the service's policy
builder: a preemption under las and a packing under jigsaw, on SQLite and on Postgres.
Admins still see the real ids; with the setting off, everyone does."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from api.scheduler.recorder import RoundRecorder
from api.scheduler.service import build_policy
from api.store import SqlStore
from jigsaw.model.cluster import Cluster
from jigsaw.scheduling.clock import WallClock
from jigsaw.scheduling.cycle import SchedulingCycle
from jigsaw.simulator.rate_executor import ConstantRate, RateDrivenExecutor
from tests.api.conftest import ApiClient, make_api

CLUSTER = Cluster.uniform(4, 4)


class Rounds:
    """Scheduling rounds as the leader runs them: one cycle (one executor) for the whole
    test, so gangs started in one round are still running in the next."""

    def __init__(self, api: ApiClient) -> None:
        with api.state.engine.begin() as conn:
            conn.exec_driver_sql("UPDATE scheduler_leader SET epoch = 1")
        store = SqlStore(api.state.engine, epoch=1)
        self._recorder = RoundRecorder(
            api.state.engine, api.state.metrics, 1, api.state.settings.policy
        )
        self._cycle = SchedulingCycle(
            store,
            RateDrivenExecutor(ConstantRate(10.0)),
            build_policy(api.state.settings, api.state.oracle),
            WallClock(),
            lambda: CLUSTER,
            on_decision=lambda now, d: self._recorder.on_decision(store, now, d),
        )

    def run(self, count: int) -> None:
        for _ in range(count):
            self._recorder.after_round(self._cycle.run_once(), CLUSTER)


@dataclasses.dataclass(frozen=True)
class Sighting:
    """A viewer's own job that names another user's job, and the views where it does."""

    viewer: str
    own: str
    other: str
    says: str
    """The words before the other job's id (or alias)."""
    views: frozenset[str]


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    policy: str
    options: dict[str, Any]
    play: Callable[[ApiClient, Rounds], list[Sighting]]


def preemption(api: ApiClient, rounds: Rounds) -> list[Sighting]:
    """las: alice's gang runs; bob's higher-priority gang outranks and preempts it."""
    alices = api.submit("alice", name="a-run", model="digits_cnn", workers=4, iterations=10**5)
    rounds.run(3)
    bobs = api.submit(
        "bob", name="b-urgent", model="digits_cnn", workers=4, iterations=10**5, priority=10
    )
    rounds.run(3)
    every = frozenset({"status", "list", "events", "logs"})
    return [Sighting("alice", str(alices["id"]), str(bobs["id"]), "preempted by", every)]


def packing(api: ApiClient, rounds: Rounds) -> list[Sighting]:
    """jigsaw: alice's 4-worker host fills the cluster; bob's three 1-worker guests are packed
    into its SPB slack (an ImageNet resnet50 at batch 64: its partial ranks idle long enough
    for a resnet18's turn, where digits_cnn's leave no room at all). A guest's events and
    logs name the host; the host's reason (its re-plan) names the guests."""
    alices = api.submit(
        "alice", name="a-host", model="resnet50_224", batch_size=64, workers=4, iterations=10**5
    )
    rounds.run(3)
    bobs = [
        api.submit("bob", name=f"b-guest-{i}", model="resnet18_32", workers=1, iterations=10**5)
        for i in range(3)
    ]
    rounds.run(3)
    host = str(alices["id"])
    reason = api.client.get(f"/api/v1/jobs/{host}", headers=api.headers("admin")).json()["reason"]
    named = [str(b["id"]) for b in bobs if f"slack for {b['id']}" in reason]
    assert named, reason
    return [
        Sighting("bob", named[0], host, "packed into", frozenset({"events", "logs"})),
        Sighting("alice", host, named[0], "slack for", frozenset({"status", "list"})),
    ]


SCENARIOS = [
    Scenario("las preemption", "las", {"min_run_s": 0}, preemption),
    Scenario("jigsaw packing", "jigsaw", {}, packing),
]

# Every answer about one's own jobs that may name another job.
VIEWS = {
    "status": "/api/v1/jobs/{job}",
    "list": "/api/v1/jobs",
    "events": "/api/v1/jobs/{job}/events",
    "logs": "/api/v1/jobs/{job}/logs",
}


@pytest.fixture(params=SCENARIOS, ids=lambda s: s.name)
def played(
    request: pytest.FixtureRequest, database_url: str, tmp_path: Path
) -> Iterator[tuple[ApiClient, list[Sighting]]]:
    scenario: Scenario = request.param
    api = make_api(
        database_url,
        tmp_path,
        private_jobs=True,
        policy=scenario.policy,
        policy_options=scenario.options,
        gpus=4,
    )
    with api.client:
        yield api, scenario.play(api, Rounds(api))
    api.state.engine.dispose()


def answer(api: ApiClient, who: str, path: str, job: str) -> str:
    response = api.client.get(path.format(job=job), headers=api.headers(who))
    assert response.status_code == 200, response.text
    return json.dumps(response.json())


@pytest.mark.parametrize("view", list(VIEWS))
def test_own_job_names_other_users_job_only_by_alias(
    played: tuple[ApiClient, list[Sighting]], view: str
) -> None:
    api, sightings = played
    for sighting in sightings:
        shown = answer(api, sighting.viewer, VIEWS[view], sighting.own)
        if view in ("status", "list"):
            assert sighting.own in shown, f"{view}: the viewer's own job keeps its id"
        assert sighting.other not in shown, f"{view} leaks {sighting.other}: {shown}"
        if view in sighting.views:
            assert f"{sighting.says} hidden-" in shown, f"{view}: {shown}"
            # An admin sees the real id where the viewer sees the alias.
            seen_by_admin = answer(api, "admin", VIEWS[view], sighting.own)
            assert f"{sighting.says} {sighting.other}" in seen_by_admin, seen_by_admin
            assert "hidden-" not in seen_by_admin


def test_preempted_by_is_the_alias_the_reason_names(database_url: str, tmp_path: Path) -> None:
    las = SCENARIOS[0]
    api = make_api(
        database_url, tmp_path, private_jobs=True, policy=las.policy, policy_options=las.options
    )
    with api.client:
        sighting = las.play(api, Rounds(api))[0]
        job = api.client.get(f"/api/v1/jobs/{sighting.own}", headers=api.headers("alice")).json()
        assert job["state"] == "PREEMPTED"
        assert job["preempted_by"].startswith("hidden-")
        assert f"preempted by {job['preempted_by']}" in job["reason"]
        as_admin = api.client.get(f"/api/v1/jobs/{sighting.own}", headers=api.headers("admin"))
        assert as_admin.json()["preempted_by"] == sighting.other
    api.state.engine.dispose()


def test_with_private_jobs_off_everyone_sees_the_ids(sqlite_url: str, tmp_path: Path) -> None:
    api = make_api(sqlite_url, tmp_path, policy="las", policy_options={"min_run_s": 0}, gpus=4)
    with api.client:
        sighting = preemption(api, Rounds(api))[0]
        events = answer(api, sighting.viewer, VIEWS["events"], sighting.own)
        assert f"preempted by {sighting.other}" in events
    api.state.engine.dispose()
