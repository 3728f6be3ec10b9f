"""The job verbs end to end: the real CLI as a subprocess against a real server process."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.cli.conftest import Cli, one_line_error, small_job, submit_json

pytestmark = pytest.mark.integration


def test_submit_with_flags_prints_the_created_job_as_json(cli: Cli) -> None:
    job = submit_json(cli, *small_job("flags"), "--spb", "staircase", "--priority", "5")
    assert str(job["id"]).startswith("j-")
    assert job["state"] == "PENDING"
    spec = job["spec"]
    assert isinstance(spec, dict)
    assert (spec["workers"], spec["iterations"], spec["spb"], spec["priority"]) == (
        2,
        20,
        "staircase",
        5,
    )


def test_status_json_prints_the_job_and_watch_follows_it_to_success(cli: Cli) -> None:
    job = submit_json(cli, *small_job("watched", iterations=30))
    watched = cli("status", str(job["id"]), "--watch", "-o", "json", timeout=120)
    assert watched.returncode == 0, watched.stderr
    final = json.loads(watched.stdout)
    assert final["id"] == job["id"]
    assert final["state"] == "SUCCEEDED"
    assert final["iterations_done"] == 30
    # stderr is not a TTY here, so progress comes as plain lines, not a live bar.
    assert "SUCCEEDED" in watched.stderr
    assert "\x1b[" not in watched.stderr
    status = cli("status", str(job["id"]), "-o", "json")
    assert status.returncode == 0
    assert json.loads(status.stdout)["state"] == "SUCCEEDED"


def test_job_file_values_are_overridden_by_flags(cli: Cli, tmp_path: Path) -> None:
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(
        yaml.safe_dump(
            {
                "name": "from-file",
                "model": "digits_cnn",
                "workers": 3,
                "iterations": 40,
                "spb": [0, 1, 1],
                "queue": "research",
            }
        )
    )
    job = submit_json(cli, "-f", str(spec_file), "--workers", "2", "--spb", "0,1")
    spec = job["spec"]
    assert isinstance(spec, dict)
    assert spec["name"] == "from-file"
    assert spec["workers"] == 2
    assert spec["spb"] == "0,1"
    assert job["queue"] == "research"

    json_file = tmp_path / "job.json"
    json_file.write_text(
        json.dumps({"name": "json-file", "model": "digits_cnn", "workers": 1, "iterations": 10})
    )
    assert submit_json(cli, "-f", str(json_file))["name"] == "json-file"


def test_invalid_spec_exits_2_with_one_line_naming_the_field(cli: Cli) -> None:
    result = cli("submit", *small_job("bad", workers=0))
    assert result.returncode == 2
    assert "workers" in one_line_error(result.stderr)
    assert result.stdout == ""


def test_unknown_field_in_a_job_file_is_named(cli: Cli, tmp_path: Path) -> None:
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text("name: a\nmodel: digits_cnn\nworkers: 1\niterations: 5\ngpus: 4\n")
    result = cli("submit", "-f", str(spec_file))
    assert result.returncode == 2
    assert "gpus" in one_line_error(result.stderr)


def test_unreadable_job_file_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    missing = cli("submit", "-f", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2
    assert "nope.yaml" in one_line_error(missing.stderr)
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    result = cli("submit", "-f", str(broken))
    assert result.returncode == 2
    assert "not valid YAML" in one_line_error(result.stderr)


def test_missing_required_flags_are_listed(cli: Cli) -> None:
    result = cli("submit", "--name", "x")
    assert result.returncode == 2
    line = one_line_error(result.stderr)
    assert "--model" in line and "--workers" in line and "--iterations" in line


def test_dry_run_prints_the_resolved_spec_and_prediction(cli: Cli) -> None:
    result = cli(
        "submit", *small_job("dry", workers=4), "--spb", "staircase", "--dry-run", "-o", "json"
    )
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["spec"]["name"] == "dry"
    assert len(body["plan"]) == 4
    assert body["prediction"]["iteration_time_s"] > 0
    assert len(body["prediction"]["per_worker_memory_bytes"]) == 4
    table = cli("submit", *small_job("dry", workers=4), "--spb", "staircase", "--dry-run")
    assert table.returncode == 0
    assert "Dry run" in table.stdout and "iteration time" in table.stdout
    listed = cli("list", "-o", "json")
    assert all(job["name"] != "dry" for job in json.loads(listed.stdout)["items"])


def test_same_idempotency_key_returns_the_same_job(cli: Cli) -> None:
    first = submit_json(cli, *small_job("idem"), "--idempotency-key", "key-123")
    again = submit_json(cli, *small_job("idem"), "--idempotency-key", "key-123")
    assert first["id"] == again["id"]
    fresh = submit_json(cli, *small_job("idem"))
    assert fresh["id"] != first["id"]


def test_list_filters_by_state_and_queue(cli: Cli) -> None:
    job = submit_json(cli, *small_job("queued-elsewhere"), "--queue", "batch")
    by_queue = json.loads(cli("list", "--queue", "batch", "-o", "json").stdout)
    assert [item["id"] for item in by_queue["items"]] == [job["id"]]
    cli("status", str(job["id"]), "--watch", timeout=120)
    done = json.loads(cli("list", "--state", "SUCCEEDED", "-o", "json").stdout)
    assert job["id"] in {item["id"] for item in done["items"]}
    assert {item["state"] for item in done["items"]} == {"SUCCEEDED"}
    table = cli("list", "--limit", "1")
    assert table.returncode == 0
    assert "STATE" in table.stdout and "showing 1 of" in table.stdout
    as_yaml = yaml.safe_load(cli("list", "--limit", "2", "-o", "yaml").stdout)
    assert len(as_yaml["items"]) == 2


def test_describe_shows_spec_events_and_plan_history(cli: Cli) -> None:
    job = submit_json(cli, *small_job("described", iterations=30), "--spb", "0,1")
    cli("status", str(job["id"]), "--watch", timeout=120)
    described = json.loads(cli("describe", str(job["id"]), "-o", "json").stdout)
    assert described["job"]["id"] == job["id"]
    states = [event["to_state"] for event in described["events"]]
    assert states[0] == "PENDING" and states[-1] == "SUCCEEDED"
    assert described["plan_history"][0]["plan"] == [0, 1]
    table = cli("describe", str(job["id"]))
    assert table.returncode == 0
    for heading in ("Spec", "Placement", "Plan history", "Events"):
        assert heading in table.stdout
    assert "SUCCEEDED" in table.stdout
    assert "Statistical efficiency (η) per plan" in table.stdout
    assert "full backprop" in table.stdout  # the eta of plan none, with its source
    assert described["job"]["eta"]["current"]["depths"] == [0, 1]


def test_logs_print_lines_and_follow_ends_when_the_job_does(cli: Cli) -> None:
    job = submit_json(cli, *small_job("logged", iterations=30))
    followed = cli("logs", str(job["id"]), "-f", timeout=120)
    assert followed.returncode == 0, followed.stderr
    assert "SUCCEEDED" in followed.stdout
    once = cli("logs", str(job["id"]))
    assert once.returncode == 0
    assert once.stdout.splitlines() == followed.stdout.splitlines()


def test_unknown_job_is_one_readable_line(cli: Cli) -> None:
    for verb in ("status", "describe", "logs", "cancel"):
        result = cli(verb, "j-000000000000")
        assert result.returncode != 0, verb
        assert "j-000000000000" in one_line_error(result.stderr), verb


def test_cancel_stops_a_job_and_a_finished_job_is_reported(cli: Cli) -> None:
    job = submit_json(cli, *small_job("to-cancel", iterations=100000))
    cancelled = cli("cancel", str(job["id"]), "-o", "json")
    assert cancelled.returncode == 0, cancelled.stderr
    assert json.loads(cancelled.stdout)["state"] == "CANCELLED"
    again = cli("cancel", str(job["id"]))
    assert again.returncode == 2
    assert "CANCELLED" in one_line_error(again.stderr)


def test_watch_exits_1_when_the_job_is_cancelled(cli: Cli) -> None:
    job = submit_json(cli, *small_job("cancelled-while-watched", iterations=100000))
    watcher = cli.popen("status", str(job["id"]), "--watch")
    time.sleep(2)
    assert cli("cancel", str(job["id"])).returncode == 0
    _, stderr = watcher.communicate(timeout=60)
    assert watcher.returncode == 1
    assert "CANCELLED" in stderr


def test_ctrl_c_while_watching_detaches_without_cancelling(cli: Cli) -> None:
    job = submit_json(cli, *small_job("detach", iterations=100000))
    watcher = cli.popen("status", str(job["id"]), "--watch")
    # Interrupt once it watches (its first line), not while Python still starts: on a loaded
    # box that takes longer than any fixed sleep, and Ctrl-C then lands before the handler.
    assert watcher.stderr is not None
    first = watcher.stderr.readline()
    watcher.send_signal(signal.SIGINT)
    try:  # a generous bound: on a loaded box the interpreter's shutdown alone can take long
        _, rest = watcher.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        watcher.kill()
        watcher.communicate()  # reaped, so no process or pipe leaks into later tests
        raise
    stderr = first + rest
    assert watcher.returncode == 130
    assert "Traceback" not in stderr
    assert "detached" in stderr
    state = json.loads(cli("status", str(job["id"]), "-o", "json").stdout)["state"]
    assert state not in ("CANCELLED", "FAILED")
    cli("cancel", str(job["id"]))


def test_users_see_only_their_own_jobs_and_cannot_mint_tokens(cli: Cli) -> None:
    admin_job = submit_json(cli, *small_job("admins"))
    created = cli("token", "create", "--name", "alice-laptop", "--user", "alice", "-o", "json")
    assert created.returncode == 0, created.stderr
    token = json.loads(created.stdout)["token"]
    assert "shown only once" in created.stderr
    alice = cli.with_token(token)
    own = submit_json(alice, *small_job("alices"))
    assert own["user"] == "alice"
    visible = {item["id"] for item in json.loads(alice("list", "-o", "json").stdout)["items"]}
    assert own["id"] in visible and admin_job["id"] not in visible
    refused = alice("token", "create", "--name", "x", "--user", "mallory", "--scope", "admin")
    assert refused.returncode == 2
    one_line_error(refused.stderr)


def test_tokens_are_listed_and_revoked_by_id(cli: Cli) -> None:
    made = cli("token", "create", "--name", "ci-runner", "--user", "carol", "-o", "json")
    created = json.loads(made.stdout)
    listed = cli("token", "list", "-o", "json")
    assert listed.returncode == 0 and created["token"] not in listed.stdout
    names = {item["id"]: item["name"] for item in json.loads(listed.stdout)["items"]}
    assert names[created["id"]] == "ci-runner"
    table = cli("token", "list").stdout
    assert table.split()[:6] == ["ID", "NAME", "USER", "SCOPES", "CREATED", "REVOKED"]
    assert "ci-runner" in table
    carol = cli.with_token(created["token"])
    assert carol("list").returncode == 0

    revoked = cli("token", "revoke", str(created["id"]))
    assert revoked.returncode == 0, revoked.stderr
    assert f"token {created['id']} ('ci-runner', user 'carol') is revoked" in revoked.stderr
    refused = carol("list")
    assert refused.returncode == 2
    one_line_error(refused.stderr)
    everyone = json.loads(cli("token", "list", "--all", "-o", "json").stdout)["items"]
    mine = next(item for item in everyone if item["id"] == created["id"])
    assert mine["revoked_at"] is not None
    assert created["id"] not in {
        i["id"] for i in json.loads(cli("token", "list", "-o", "json").stdout)["items"]
    }

    unknown = cli("token", "revoke", "999999")
    assert unknown.returncode == 2
    assert "token list" in one_line_error(unknown.stderr)
    assert cli("token", "revoke", "first").returncode == 2


def test_missing_or_bad_token_says_how_to_configure_one(cli: Cli) -> None:
    missing = cli.with_token(None)("list")
    assert missing.returncode == 2
    line = one_line_error(missing.stderr)
    assert "JIGSAW_TOKEN" in line
    bad = cli.with_token("jgs_not-a-token")("list")
    assert bad.returncode == 2
    one_line_error(bad.stderr)


def test_token_and_url_come_from_the_config_file(cli: Cli, tmp_path: Path) -> None:
    config = tmp_path / "xdg" / "jigsaw" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'url = "{cli.env["JIGSAW_URL"]}"\ntoken = "{cli.env["JIGSAW_TOKEN"]}"\n')
    env = {k: v for k, v in cli.env.items() if k not in ("JIGSAW_URL", "JIGSAW_TOKEN")}
    from_file = Cli({**env, "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert from_file("list").returncode == 0
    # The environment wins over the file.
    overridden = from_file("list", JIGSAW_TOKEN="jgs_wrong")
    assert overridden.returncode == 2


def test_json_output_is_served_verbatim_from_the_api(cli: Cli) -> None:
    job = submit_json(cli, *small_job("verbatim"))
    via_cli = json.loads(cli("status", str(job["id"]), "-o", "json").stdout)
    direct = httpx.get(
        f"{cli.env['JIGSAW_URL']}/api/v1/jobs/{job['id']}",
        headers={"Authorization": f"Bearer {cli.env['JIGSAW_TOKEN']}"},
    ).json()
    assert set(via_cli) == set(direct)
    assert via_cli["id"] == direct["id"]
