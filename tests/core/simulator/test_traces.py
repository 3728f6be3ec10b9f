from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from jigsaw.efficiency.table import EfficiencyTable
from jigsaw.model.errors import TraceFormatError
from jigsaw.model.hardware import preset
from jigsaw.oracle import Oracle
from jigsaw.oracle.profile_catalog import ProfileCatalog
from jigsaw.traces import GavelThroughputs, load_trace, read_philly
from jigsaw.traces.model_mix import assign_model
from jigsaw.traces.pollux_curves import load_app_curves

DATA = Path(__file__).resolve().parents[2] / "data"
SHARED = Path(os.environ.get("JIGSAW_SHARED_DIR", Path(__file__).resolve().parents[4] / "shared"))
PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_philly_excerpt_sorted_relative_with_models() -> None:
    jobs = load_trace(DATA / "philly_excerpt.csv")
    assert len(jobs) == 40
    times = [job.submit_time_s for job in jobs]
    assert times[0] == 0.0 and times == sorted(times)
    assert all(job.duration_s is not None and job.iterations is None for job in jobs)
    assert jobs[0].source.endswith(f":{jobs[0].id.split('-')[1]}")
    again = read_philly(DATA / "philly_excerpt.csv")
    assert [j.model for j in again] == [j.model for j in jobs]  # seeded, deterministic


def test_philly_ties_keep_file_order_and_window_and_limit(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "p.csv",
        PHILLY_HEADER
        + "2017-10-03 00:00:00,10,1,10,a\n"
        + "2017-10-01 00:00:00,20,2,40,b\n"
        + "2017-10-03 00:00:00,30,1,30,c\n"
        + "2017-10-05 00:00:00,40,4,160,d\n",
    )
    jobs = read_philly(path)
    assert [j.user for j in jobs] == ["b", "a", "c", "d"]
    window = read_philly(path, start="2017-10-02", end="2017-10-05")
    assert [(j.user, j.submit_time_s) for j in window] == [("a", 0.0), ("c", 0.0)]
    assert [j.user for j in read_philly(path, limit=2)] == ["b", "a"]


def test_philly_iterations_from_oracle_rate(tmp_path: Path) -> None:
    oracle = Oracle(preset("v100"), ProfileCatalog(use_measured=False), EfficiencyTable())
    path = _write(tmp_path, "p.csv", PHILLY_HEADER + "2017-10-03 00:00:00,100,2,200,a\n")
    (job,) = read_philly(path, oracle=oracle, gpus_per_node=8)
    rate = oracle.full_rate(job.model, job.batch_size, 2, 8)
    assert job.iterations == round(100 * rate)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("2017-13-03 00:00:00,10,1,10,a", "timestamp"),
        ("2017-10-03 00:00:00,ten,1,10,a", "duration"),
        ("2017-10-03 00:00:00,10,0,10,a", "num_gpus"),
        ("2017-10-03 00:00:00,10,1.5,10,a", "num_gpus"),
        ("2017-10-03 00:00:00,10,1", "5 fields"),
    ],
)
def test_philly_malformed_rows_name_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    path = _write(tmp_path, "bad.csv", PHILLY_HEADER + "2017-10-03 00:00:00,1,1,1,a\n" + row)
    with pytest.raises(TraceFormatError, match=message) as error:
        read_philly(path)
    assert error.value.line == 3 and str(error.value).startswith(f"{path}:3:")


def test_philly_model_mix_depends_on_gpu_class() -> None:
    big = {assign_model(16, line, 0) for line in range(500)}
    small = {assign_model(1, line, 0) for line in range(500)}
    assert "vgg16_224" in big and "mlp" not in big
    assert "mlp" in small and "vgg16_224" not in small


def test_pollux_workload_excerpt() -> None:
    jobs = load_trace(DATA / "pollux_workload_excerpt.csv")
    assert len(jobs) == 20
    first = next(j for j in jobs if j.id == "cifar10-0")
    assert (first.num_workers, first.batch_size, first.model) == (6, 342, "cifar10")
    # Pollux's semantics: 100 epochs through statistical efficiency at the job's batch (6 x 342).
    curves = load_app_curves(DATA / "pollux" / "apps" / "cifar10")
    assert first.iterations == math.ceil(curves.iterations_to_finish(6 * 342))


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("x,10,mnist,1,32", "unknown application"),
        ("x,soon,cifar10,1,32", "time"),
        ("x,10,cifar10,0,32", "num_replicas"),
    ],
)
def test_pollux_malformed(tmp_path: Path, row: str, message: str) -> None:
    path = _write(tmp_path, "w.csv", "name,time,application,num_replicas,batch_size\n" + row)
    with pytest.raises(TraceFormatError, match=message) as error:
        load_trace(path)
    assert error.value.line == 2


def test_gavel_excerpt_and_throughputs() -> None:
    jobs = load_trace(DATA / "gavel_excerpt.trace")
    assert len(jobs) == 12
    first = jobs[0]
    assert (first.model, first.batch_size, first.iterations) == ("gpt_small", 128, 19605)
    assert first.original_model == "Transformer (batch size 128)"
    table = GavelThroughputs.load(DATA / "gavel_throughputs_excerpt.json")
    assert table.steps_per_second("v100", "ResNet-50 (batch size 64)", 1) > 0
    pair = table.paired_steps_per_second("v100", ("ResNet-18 (batch size 16)", 1), ("A3C", 1))
    assert len(pair) == 2


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("ResNet-18 (batch size 32)\tcmd\tdir\t-s\t1\t100\t1\t1\t-1", "10 tab-separated"),
        ("Mystery\tcmd\tdir\t-s\t1\t100\t1\t1\t-1\t0", "unknown Gavel job type"),
        ("A3C\tcmd\tdir\t-s\t1\t100\tbig\t1\t-1\t0", "scale_factor"),
        ("A3C\tcmd\tdir\t-s\t1\t0\t1\t1\t-1\t0", "total_steps"),
    ],
)
def test_gavel_malformed(tmp_path: Path, line: str, message: str) -> None:
    good = "A3C\tcmd\tdir\t-s\t1\t100\t1\t1\t-1\t0\n"
    path = _write(tmp_path, "t.trace", good + line + "\n")
    with pytest.raises(TraceFormatError, match=message) as error:
        load_trace(path)
    assert error.value.line == 2


def test_joblist_yaml_and_json(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "jobs.yaml",
        """
jobs:
  - {name: b, model: resnet50_224, workers: 4, iterations: 100, submit_time: 5, spb: staircase}
  - {name: a, model: mlp, workers: 1, iterations: 10, batch_size: 16, spb: [0], user: eve}
""",
    )
    jobs = load_trace(path)
    assert [j.id for j in jobs] == ["a", "b"]
    assert (jobs[0].batch_size, jobs[0].spb, jobs[0].user) == (16, "0", "eve")
    assert jobs[1].batch_size == 32
    as_json = _write(
        tmp_path, "jobs.json", '[{"name": "x", "model": "bert", "workers": 2, "duration_s": 60}]'
    )
    (job,) = load_trace(as_json)
    assert (job.duration_s, job.iterations) == (60.0, None)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{name: a, model: mlp, iterations: 1}", "missing required field 'workers'"),
        ("{name: a, model: mlp, workers: 0, iterations: 1}", "workers"),
        ("{name: a, model: mlp, workers: 1}", "iterations"),
        ("{name: a, model: mlp, workers: 1, iterations: 1, spb: sideways}", "unknown plan"),
        ("{name: a, model: mlp, workers: 1, iterations: 1, colour: red}", "unknown field"),
    ],
)
def test_joblist_malformed(tmp_path: Path, entry: str, message: str) -> None:
    path = _write(
        tmp_path, "j.yaml", f"- {{name: ok, model: mlp, workers: 1, iterations: 1}}\n- {entry}\n"
    )
    with pytest.raises(TraceFormatError, match=message) as error:
        load_trace(path)
    assert error.value.line == 2


def test_load_trace_refuses_unknown_formats(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="unknown trace format"):
        load_trace(_write(tmp_path, "x.txt", ""))
    with pytest.raises(TraceFormatError, match="header"):
        load_trace(_write(tmp_path, "x.csv", "a,b\n"))
    with pytest.raises(TraceFormatError, match="do not apply"):
        load_trace(DATA / "gavel_excerpt.trace", limit=3)


@pytest.mark.skipif(not (SHARED / "traces" / "philly.csv").is_file(), reason="no ../shared")
def test_the_full_philly_trace_reads_completely() -> None:
    # How fast it reads is a benchmark figure (bench/sim_speed.py reports load_s).
    jobs = load_trace(SHARED / "traces" / "philly.csv")
    assert len(jobs) == 82_247
    assert len({job.id for job in jobs}) == 82_247
