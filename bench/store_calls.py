"""Per-call cost of the SQL store's hottest methods on Postgres, in process and single
threaded: ``SqlStore.add`` (a submission) and ``SqlStore.get`` + ``job_json`` (a status read).
No HTTP, no threads: this isolates the store's round trips and Python work from the server's.
Creates and drops a database of its own. Prints ONE JSON object.

    JIGSAW_TEST_DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/test \\
        .venv/bin/python -m bench.store_calls [--calls 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

import psycopg
from sqlalchemy.engine import make_url

from api.db import make_engine
from api.migrate import upgrade_to_head
from api.presenters import job_json
from api.store import SqlStore
from jigsaw.model.domain import Job, JobSpec, new_job_id, submitted_event

SPEC = {"name": "bench", "model": "mlp", "workers": 2, "iterations": 100, "user": "bench"}


def timed(calls: int, one: Callable[[int], object]) -> dict[str, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for index in range(calls):
        one(index)
    return {
        "wall_ms_per_call": round(1000 * (time.perf_counter() - wall) / calls, 3),
        "cpu_ms_per_call": round(1000 * (time.process_time() - cpu) / calls, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--database-url", default=os.environ.get("JIGSAW_TEST_DATABASE_URL"))
    args = parser.parse_args()
    if not args.database_url:
        raise SystemExit("set JIGSAW_TEST_DATABASE_URL or pass --database-url (Postgres)")
    name = f"jigsaw_store_calls_{os.getpid()}"
    admin_url = make_url(args.database_url).set(drivername="postgresql")
    libpq = admin_url.render_as_string(hide_password=False)
    with psycopg.connect(libpq, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    engine = make_engine(make_url(args.database_url).set(database=name).render_as_string(False))
    try:
        upgrade_to_head(engine)
        store = SqlStore(engine)
        spec = JobSpec.from_mapping(SPEC)
        ids: list[str] = []

        def add(_index: int) -> None:
            job = Job(id=new_job_id(), spec=spec, submitted_at=time.time())
            store.add(job, submitted_event(job, "bench"))
            ids.append(job.id)

        def read(index: int) -> None:
            job_json(store.get(ids[index % len(ids)]))

        timed(min(args.calls, 200), add)  # warm: connections, compiled statements
        timed(min(args.calls, 200), read)
        report = {
            "benchmark": "store_calls",
            "database": "postgres",
            "calls": args.calls,
            "add": timed(args.calls, add),
            "get_and_serialize": timed(args.calls, read),
        }
        print(json.dumps(report, indent=2))
    finally:
        engine.dispose()
        with psycopg.connect(libpq, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


if __name__ == "__main__":
    main()
