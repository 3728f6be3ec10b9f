"""Control-plane throughput against Postgres: submissions and status reads with N concurrent
clients, side by side with two baselines measured in the same run:

- a bare FastAPI app (bench/api_baseline_app.py) served the same way, doing no DB work;
- raw psycopg: N threads inserting job-sized rows, one transaction each (the DB's ceiling).

Then the same submissions and reads against ``--replicas`` API processes at once (the
clients spread evenly), which is how a deployment scales the API: several replicas with
``JIGSAW_SCHEDULER=off`` next to one scheduler.

In a submission phase of its own, py-spy samples the thread holding the server's GIL and the
self time is grouped by package to name the bottleneck. Prints ONE JSON object.

    JIGSAW_TEST_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m bench.api_throughput [--clients 16] [--seconds 10] [--replicas 3]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
from sqlalchemy.engine import make_url

from bench.http_load import Request, RequestMaker, run_load

REPO = Path(__file__).resolve().parents[1]
SPEC = {"name": "bench", "model": "mlp", "workers": 1, "iterations": 100}
TARGETS = {"submissions_per_s": 1000.0, "submit_p99_ms": 50.0, "status_reads_per_s": 3000.0}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def wait_http(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited: {log.read_text()}")
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"server at {url} did not come up: {log.read_text()}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (uvicorn worker processes)."""
    tree, index = [pid], 0
    while index < len(tree):
        for task in Path(f"/proc/{tree[index]}/task").iterdir():
            children = (task / "children").read_text().split()
            tree.extend(int(child) for child in children)
        index += 1
    return tree


def server_cpu(pids: list[int]) -> float:
    """CPU seconds of the servers' whole process trees (live processes only)."""
    total = 0.0
    for root in pids:
        for pid in process_tree(root):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                total += cpu_seconds(pid)
    return total


def measure(
    name: str,
    url: str | list[str],
    pids: list[int],
    make_request: RequestMaker,
    args: argparse.Namespace,
    headers: dict[str, str],
) -> dict[str, Any]:
    """One phase: warm up, then load for ``args.seconds``; server CPU summed over ``pids``."""
    run_load(url, make_request, args.clients, min(2.0, args.seconds), headers)  # warm
    before, client_before = server_cpu(pids), time.process_time()
    result = run_load(url, make_request, args.clients, args.seconds, headers)
    result["server_cpu_ms_per_request"] = round(
        1000 * (server_cpu(pids) - before) / max(result["requests"], 1), 3
    )
    result["client_cpu_ms_per_request"] = round(
        1000 * (time.process_time() - client_before) / max(result["requests"], 1), 3
    )
    print(f"{name}: {result}", file=sys.stderr)
    return result


def raw_inserts(database_url: str, clients: int, seconds: float) -> dict[str, Any]:
    """N threads, each its own connection, one INSERT + COMMIT per row (like a submission)."""
    with psycopg.connect(libpq(database_url), autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_raw (id text PRIMARY KEY, spec json, "
            "state text, submitted_at double precision)"
        )
    counts = [0] * clients
    stop_at = time.perf_counter() + seconds
    spec = json.dumps(SPEC)

    def work(index: int) -> None:
        with psycopg.connect(libpq(database_url)) as conn:
            while time.perf_counter() < stop_at:
                conn.execute(
                    "INSERT INTO bench_raw VALUES (%s, %s, 'PENDING', %s)",
                    (secrets.token_hex(8), spec, time.time()),
                )
                conn.commit()
                counts[index] += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"inserts": sum(counts), "per_s": round(sum(counts) / (time.perf_counter() - began), 1)}


WAITING = {"threading", "asyncio", "concurrent", "selectors", "queue"}


def profile_server(pid: int, seconds: float, folder: Path) -> dict[str, Any]:
    """py-spy samples (100 Hz) of the server thread holding the GIL, i.e. its Python CPU
    time, split by the package of the innermost frame (self) and of any frame on the stack
    (inclusive). ``gil_held_fraction``: the share of samples in which some thread held it."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    out = folder / "profile.txt"
    command = [spy, "record", "--gil", "-r", "100", "-p", str(pid), "-d", str(int(seconds))]
    result = subprocess.run(
        [*command, "-f", "raw", "-o", str(out)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0 or not out.exists():
        return {"error": (result.stderr or result.stdout)[-300:]}
    self_time: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    busy = idle = 0
    for line in out.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = [frame for frame in stack.split(";") if "(" in frame]
        if not frames:
            continue
        leaf = _package(frames[-1])
        if leaf in WAITING:
            idle += count
            continue
        busy += count
        self_time[leaf] += count
        for package in {_package(frame) for frame in frames}:
            inclusive[package] += count
    if not busy:
        return {"error": "no busy samples"}

    def share(counter: collections.Counter[str]) -> dict[str, float]:
        return {k: round(100 * v / busy, 1) for k, v in counter.most_common(12)}

    return {
        "gil_held_fraction": round((busy + idle) / (100 * int(seconds)), 3),
        "busy_samples": busy,
        "idle_samples": idle,
        "self_percent_of_busy": share(self_time),
        "inclusive_percent_of_busy": share(inclusive),
    }


PACKAGE_PATTERNS = [
    (name, re.compile(rf"(^|[/(]){name}(/|\.py)"))
    for name in (
        "sqlalchemy", "psycopg", "pydantic_core", "pydantic", "fastapi", "starlette",
        "uvicorn", "anyio", "httptools", "h11", "json", "prometheus_client", "jigsaw", "api",
        "threading", "asyncio", "concurrent", "selectors", "queue", "uvloop",
    )
]  # fmt: skip


def _package(frame: str) -> str:
    # py-spy raw frames look like "function (path/to/module.py:line)".
    location = frame.rpartition("(")[2]
    for name, pattern in PACKAGE_PATTERNS:
        if pattern.search(location):
            return name
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument(
        "--replicas",
        type=int,
        default=3,
        help="also measure this many API server processes side by side (clients spread "
        "evenly), as a deployment with several API replicas and JIGSAW_SCHEDULER=off runs",
    )
    parser.add_argument("--database-url", default=os.environ.get("JIGSAW_TEST_DATABASE_URL"))
    args = parser.parse_args()
    if not args.database_url:
        raise SystemExit("set JIGSAW_TEST_DATABASE_URL or pass --database-url (Postgres)")
    name = f"jigsaw_bench_{os.getpid()}"
    with psycopg.connect(libpq(args.database_url), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    database_url = make_url(args.database_url).set(database=name).render_as_string(False)
    folder = Path(tempfile.mkdtemp(prefix="jigsaw-bench-"))
    token = "bench-admin-" + secrets.token_urlsafe(24)
    ours_port, base_port = free_port(), free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("JIGSAW_")},
        "PYTHONPATH": str(REPO),
        "JIGSAW_DATABASE_URL": database_url,
        "JIGSAW_ADMIN_TOKEN": token,
        "JIGSAW_PORT": str(ours_port),
        "JIGSAW_SCHEDULER": "off",
        "JIGSAW_DATA_DIR": str(folder),
        "XDG_CONFIG_HOME": str(folder),
    }
    processes: list[subprocess.Popen[bytes]] = []
    try:
        ours_log, base_log = folder / "ours.log", folder / "baseline.log"
        ours = subprocess.Popen(
            [sys.executable, "-m", "api"], cwd=REPO, env=env,
            stdout=ours_log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        processes.append(ours)
        base = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "bench.api_baseline_app:app", "--port",
             str(base_port), "--log-level", "warning", "--no-access-log"],
            cwd=REPO, env=env, stdout=base_log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        processes.append(base)
        ours_url, base_url = f"http://127.0.0.1:{ours_port}", f"http://127.0.0.1:{base_port}"
        wait_http(f"{ours_url}/healthz", ours, ours_log)
        wait_http(f"{base_url}/ping", base, base_log)
        auth = {"Authorization": f"Bearer {token}"}

        def submit(_i: int, _n: int) -> Request:
            return Request("POST", "/api/v1/jobs", SPEC)

        def submit_keyed(i: int, n: int) -> Request:
            key = f"{os.getpid()}-{i}-{n}-{time.perf_counter_ns()}"
            return Request("POST", "/api/v1/jobs", SPEC, {"Idempotency-Key": key})

        def echo(_i: int, _n: int) -> Request:
            return Request("POST", "/echo", SPEC)

        def ping(_i: int, _n: int) -> Request:
            return Request("GET", "/ping")

        results: dict[str, Any] = {}
        results["baseline_bare_post"] = measure("bare post", base_url, [base.pid], echo, args, {})
        results["baseline_bare_get"] = measure("bare get", base_url, [base.pid], ping, args, {})
        results["submit"] = measure("submit", ours_url, [ours.pid], submit, args, auth)
        # Profiled in a phase of its own: the sampler costs CPU the measured phase should not.
        profile: dict[str, Any] = {}
        profiler = threading.Thread(
            target=lambda: profile.update(profile_server(ours.pid, args.seconds / 2, folder))
        )
        threading.Timer(1.0, profiler.start).start()
        run_load(ours_url, submit, args.clients, args.seconds / 2 + 2.0, auth)
        profiler.join()
        results["submit_idempotent"] = measure(
            "submit+key", ours_url, [ours.pid], submit_keyed, args, auth
        )
        ids = [
            job["id"]
            for job in httpx.get(f"{ours_url}/api/v1/jobs?limit=1000", headers=auth).json()["items"]
        ]

        def status(i: int, n: int) -> Request:
            return Request("GET", f"/api/v1/jobs/{ids[(i * 7919 + n) % len(ids)]}")

        results["status_read"] = measure("status", ours_url, [ours.pid], status, args, auth)
        if args.replicas > 1:
            replicas = [ours]
            urls = [ours_url]
            for index in range(1, args.replicas):
                port = free_port()
                replica_log = folder / f"replica-{index}.log"
                replica = subprocess.Popen(
                    [sys.executable, "-m", "api"], cwd=REPO,
                    env={**env, "JIGSAW_PORT": str(port)},
                    stdout=replica_log.open("wb"), stderr=subprocess.STDOUT,
                )  # fmt: skip
                processes.append(replica)
                replicas.append(replica)
                urls.append(f"http://127.0.0.1:{port}")
                wait_http(f"{urls[-1]}/healthz", replica, replica_log)
            pids = [process.pid for process in replicas]
            label = f"{args.replicas} replicas"
            results["submit_replicas"] = measure(f"submit, {label}", urls, pids, submit, args, auth)
            results["status_read_replicas"] = measure(
                f"status, {label}", urls, pids, status, args, auth
            )
        results["baseline_raw_psycopg_insert"] = raw_inserts(
            database_url, args.clients, args.seconds
        )
        submit_rate = results["submit"]["per_s"]
        report = {
            "benchmark": "api_throughput",
            "machine": {"cpus": os.cpu_count(), "clients": args.clients, "seconds": args.seconds},
            "database": "postgres",
            "results": results,
            "ratios": {
                "submit_vs_bare_post": round(
                    submit_rate / results["baseline_bare_post"]["per_s"], 3
                ),
                "submit_vs_raw_insert": round(
                    submit_rate / results["baseline_raw_psycopg_insert"]["per_s"], 3
                ),
                "status_vs_bare_get": round(
                    results["status_read"]["per_s"] / results["baseline_bare_get"]["per_s"], 3
                ),
                **(
                    {
                        "submit_replicas_vs_one": round(
                            results["submit_replicas"]["per_s"] / submit_rate, 3
                        ),
                        "status_replicas_vs_one": round(
                            results["status_read_replicas"]["per_s"]
                            / results["status_read"]["per_s"],
                            3,
                        ),
                    }
                    if args.replicas > 1
                    else {}
                ),
            },
            "targets": TARGETS,
            "met": {
                "submissions_per_s": submit_rate >= TARGETS["submissions_per_s"],
                "submit_p99_ms": results["submit"]["p99_ms"] <= TARGETS["submit_p99_ms"],
                "status_reads_per_s": results["status_read"]["per_s"]
                >= TARGETS["status_reads_per_s"],
            },
            "server_profile_during_submit": profile,
        }
        print(json.dumps(report, indent=2))
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        with psycopg.connect(libpq(args.database_url), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
