"""Per-request cost of ``POST /api/v1/jobs`` and ``POST /api/v1/jobs:validate`` through the
whole app (routing, auth, validation, the submission checks, the store), in process with
Starlette's TestClient on Postgres: an interleaved A/B of two source trees in one run.

Each round runs one child process per tree, alternating which goes first; each child makes a
database of its own, migrates it, warms up and times ``--requests`` sequential submissions
and as many validations. Prints ONE JSON object with the per-tree medians over rounds and
the ratio candidate / baseline (above 1: the candidate is slower).

    git archive <baseline-commit> | tar -x -C /tmp/jigsaw-baseline
    JIGSAW_TEST_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m bench.submit_path_ab --baseline /tmp/jigsaw-baseline \\
        --candidate . [--rounds 3] [--requests 400]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, secrets, statistics, sys, tempfile, time, warnings
import psycopg
from sqlalchemy.engine import make_url
warnings.filterwarnings("ignore")
from fastapi.testclient import TestClient
from api.app import build_state, create_app
from api.migrate import upgrade_to_head
from api.settings import Settings
from api.tokens import create_token

server_url, requests = sys.argv[1], int(sys.argv[2])
name = "bench_submit_" + secrets.token_hex(4)
admin = make_url(server_url).set(database="postgres").render_as_string(hide_password=False)
libpq = admin.replace("postgresql+psycopg://", "postgresql://")
with psycopg.connect(libpq, autocommit=True) as conn:
    conn.execute(f"CREATE DATABASE {name}")
url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
try:
    with tempfile.TemporaryDirectory() as home:
        state = build_state(Settings(database_url=url, data_dir=home,
                                     config_path=f"{home}/config.toml", gpus=64))
        upgrade_to_head(state.engine)
        token = create_token(state.engine, name="b", user="bench", scopes=["user"]).token
        headers = {"Authorization": f"Bearer {token}"}
        body = {"name": "bench", "model": "digits_cnn", "workers": 4, "iterations": 100,
                "spb": "staircase"}
        with TestClient(create_app(state=state)) as client:
            def timed(path, expect):
                samples = []
                for _ in range(requests):
                    started = time.perf_counter()
                    response = client.post(path, json=body, headers=headers)
                    samples.append(time.perf_counter() - started)
                    assert response.status_code == expect, response.text
                return statistics.median(samples) * 1e3
            for _ in range(50):
                client.post("/api/v1/jobs", json=body, headers=headers)
            result = {"submit_ms": timed("/api/v1/jobs", 201),
                      "validate_ms": timed("/api/v1/jobs:validate", 200)}
        state.engine.dispose()
finally:
    with psycopg.connect(libpq, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
print(json.dumps(result))
"""


def run_child(tree: Path, database_url: str, requests: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree.resolve()), "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, database_url, str(requests)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--candidate", type=Path, default=Path("."))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--database-url", default=os.environ.get("JIGSAW_TEST_DATABASE_URL"))
    args = parser.parse_args()
    if not args.database_url:
        parser.error("set JIGSAW_TEST_DATABASE_URL or pass --database-url")
    trees = {"baseline": args.baseline, "candidate": args.candidate}
    runs: dict[str, list[dict[str, float]]] = {"baseline": [], "candidate": []}
    for round_index in range(args.rounds):
        order = ["baseline", "candidate"] if round_index % 2 == 0 else ["candidate", "baseline"]
        for label in order:
            runs[label].append(run_child(trees[label], args.database_url, args.requests))
    summary: dict[str, object] = {
        "bench": "submit_path_ab",
        "rounds": args.rounds,
        "requests_per_round": args.requests,
        "baseline": str(args.baseline),
        "candidate": str(args.candidate),
    }
    for metric in ("submit_ms", "validate_ms"):
        base = statistics.median(run[metric] for run in runs["baseline"])
        cand = statistics.median(run[metric] for run in runs["candidate"])
        summary[metric] = {
            "baseline": round(base, 3),
            "candidate": round(cand, 3),
            "ratio": round(cand / base, 3),
            "per_round": {k: [round(r[metric], 3) for r in v] for k, v in runs.items()},
        }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
