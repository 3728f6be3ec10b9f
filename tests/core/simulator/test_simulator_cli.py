"""`jigsaw-cli simulate` as a user runs it: a real subprocess."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from jigsaw.simulator.trace_replay import simulate_trace, simulation_setup

ROOT = Path(__file__).resolve().parents[3]
TRACE = ROOT / "tests" / "data" / "philly_excerpt.csv"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", "simulate", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_compares_policies_as_json_and_plots(tmp_path: Path) -> None:
    figure = tmp_path / "sim.png"
    done = cli(
        str(TRACE), "--policy", "fifo,jigsaw", "--gpus", "16", "-o", "json", "--plot", str(figure)
    )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert [r["policy"] for r in payload["results"]] == ["fifo", "jigsaw"]
    for result in payload["results"]:
        assert result["completed"] == result["jobs"] == 40
        for key in (
            "avg_jct_s",
            "p50_jct_s",
            "p99_jct_s",
            "makespan_s",
            "utilization",
            "cluster_efficiency",
            "preemptions",
            "wall_s",
            "eta_source",
        ):
            assert key in result
    assert figure.read_bytes()[:4] == b"\x89PNG"


def test_user_mistakes_exit_2_with_one_line() -> None:
    for args in (
        (str(TRACE), "--policy", "sjf"),
        ("/no/such/trace.csv",),
        (str(TRACE), "--start", "yesterday"),
        (str(ROOT / "pyproject.toml"),),
    ):
        done = cli(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr


def test_the_output_says_which_semantics_ran() -> None:
    pollux = cli(
        str(ROOT / "tests" / "data" / "pollux_workload_excerpt.csv"),
        "--policy",
        "las",
        "--gpus",
        "64",
        "--gpus-per-node",
        "4",
        "-o",
        "json",
    )
    assert pollux.returncode == 0, pollux.stderr
    result = json.loads(pollux.stdout)
    assert (result["semantics"], result["round_s"], result["completed"]) == ("pollux", 60.0, 20)
    table = cli(
        str(ROOT / "tests" / "data" / "pollux_workload_excerpt.csv"),
        "--policy",
        "las",
        "--gpus",
        "64",
        "--gpus-per-node",
        "4",
    )
    assert table.returncode == 0, table.stderr
    assert "semantics: pollux" in table.stdout


def test_gavel_bad_input_names_what_to_fix(tmp_path: Path) -> None:
    throughputs = ROOT / "tests" / "data" / "gavel_throughputs_excerpt.json"
    trace = tmp_path / "t.trace"
    trace.write_text("LM (batch size 20)\tcmd\tdir\t-s\t1\t100\t1\t1\t-1\t0\n")
    done = cli(str(trace), "--policy", "fifo", "--gpus", "4", "--throughputs", str(throughputs))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: no Gavel throughput for 'LM (batch size 20)' x1 on 'v100'"
    ]


def test_pollux_application_without_curves_is_refused_with_file_and_line(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "w.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\nb,5,bert,1,12\n")
    done = cli(str(trace), "--policy", "las")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{trace}:2:" in lines[0] and "'bert'" in lines[0], lines


def test_policy_options_and_eta_reach_the_replay_as_the_bench_sees_it() -> None:
    """``bench/sim_gain.py`` calls :func:`simulate_trace`; the CLI must give the same figures."""
    pollux = ROOT / "tests" / "data" / "pollux_workload_excerpt.csv"
    args = (str(pollux), "--policy", "jigsaw,timeslice", "--gpus", "8", "--gpus-per-node", "4")
    solo = '{"jigsaw": {"config": {"guests": false, "hosts": false}}}'
    done = cli(*args, "--policy-options", solo, "-o", "json")
    assert done.returncode == 0, done.stderr
    by_policy = {r["policy"]: r for r in json.loads(done.stdout)["results"]}
    assert by_policy["jigsaw"]["replans"] == by_policy["jigsaw"]["packed_starts"] == 0
    assert by_policy["timeslice"]["packed_starts"] > 0
    setup = simulation_setup(
        pollux,
        gpus=8,
        gpus_per_node=4,
        policy_options={"jigsaw": {"config": {"guests": False, "hosts": False}}},
    )
    for result in simulate_trace(pollux, ["jigsaw", "timeslice"], setup):
        mine = by_policy[result.summary["policy"]]
        assert result.summary["avg_jct_s"] == mine["avg_jct_s"]
        assert result.summary["packed_starts"] == mine["packed_starts"]
    default = json.loads(cli(*args, "-o", "json").stdout)["results"][0]
    blind = '{"jigsaw": {"config": {"knowledge": "oracle"}}}'
    oracle_only = json.loads(cli(*args, "--policy-options", blind, "-o", "json").stdout)
    assert default["resizes"] > 0 and oracle_only["results"][0]["resizes"] == 0
    unit = json.loads(cli(*args, "--eta", "one", "-o", "json").stdout)["results"][0]
    assert unit["eta_source"] == "ablation: eta = 1 for every plan"


def test_bad_policy_options_exit_2_with_one_line() -> None:
    cases = {
        '{"sjf": {}}': "unknown policy 'sjf'",
        '{"jigsaw": {"speed": 2}}': "'jigsaw' has no option 'speed'",
        '{"jigsaw": {"config": {"fairness_power": 1}}}': "fairness_power must be negative",
        '{"las": {}}': "'las', which is not among the policies run",
        '{"jigsaw": ': "--policy-options is not JSON",
        '["jigsaw"]': "--policy-options must be a JSON object",
    }
    for raw, message in cases.items():
        done = cli(str(TRACE), "--policy", "jigsaw", "--policy-options", raw)
        assert done.returncode == 2, (raw, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert message in done.stderr, (raw, done.stderr)
    done = cli(str(TRACE), "--eta", "guess")
    assert (done.returncode, done.stderr.strip()) == (
        2,
        "error: --eta must be one of table, curve, one, got 'guess'",
    )


def test_the_job_table_accounts_for_every_figure_of_the_summary(tmp_path: Path) -> None:
    """--jobs writes one row per job and policy; the summary's average JCT, makespan and
    preemptions are those of the rows, so a figure can be traced to the jobs behind it."""
    table = tmp_path / "jobs.csv"
    done = cli(
        str(TRACE), "--policy", "fifo,las", "--gpus", "8", "--gpus-per-node", "4",
        "-o", "json", "--jobs", str(table),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summaries = {r["policy"]: r for r in json.loads(done.stdout)["results"]}
    with table.open() as handle:
        rows = list(csv.DictReader(handle))
    for policy, summary in summaries.items():
        mine = [row for row in rows if row["policy"] == policy]
        assert len(mine) == summary["jobs"] == 40
        jcts = [float(row["jct_h"]) for row in mine]
        assert sum(jcts) / len(jcts) == pytest.approx(summary["avg_jct_s"] / 3600, abs=1e-3)
        finishes = [float(row["finished_h"]) for row in mine]
        assert max(finishes) == pytest.approx(summary["makespan_s"] / 3600, abs=1e-3)
        assert sum(int(row["preemptions"]) for row in mine) == summary["preemptions"]
        for row in mine:
            assert float(row["submitted_h"]) <= float(row["first_start_h"])
            assert float(row["first_start_h"]) < float(row["finished_h"])
    # las preempts on this cluster and fifo does not: the rows tell the two apart.
    assert summaries["las"]["preemptions"] > 0 == summaries["fifo"]["preemptions"]


def test_an_unwritable_job_table_is_refused_before_the_replay(tmp_path: Path) -> None:
    for target in (tmp_path / "missing" / "jobs.csv", tmp_path):
        done = cli(str(TRACE), "--jobs", str(target))
        assert done.returncode == 2
        assert done.stdout == ""  # refused before anything ran
        assert len(done.stderr.strip().splitlines()) == 1 and "--jobs" in done.stderr
