"""``Idempotency-Key`` for submissions: insert-first claims on a unique (user, key).

1. ``claim`` inserts ``(user, key, request hash, in_flight)`` in its own transaction. The
   unique constraint makes exactly one concurrent request the owner.
2. The owner creates the job and, in the *same* transaction, stores the response bytes and
   marks the key ``done`` (``complete``), so a key is never done without its job or vice versa.
3. Everyone else reads the row: ``done`` -> replay the stored status and body byte for byte;
   ``in_flight`` -> 409 (retry shortly); another request body under the same key -> 422.

A claim left ``in_flight`` by a crashed process is taken over after ``abandon_after_s``. Keys
are kept ``ttl_s`` (>= 24 h) and purged after that.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from api.db import single_statement_writer, writer
from api.errors import ApiError
from api.models import idempotency_keys as keys

MAX_KEY_LENGTH = 255


@dataclass(frozen=True, slots=True)
class Claim:
    row_id: int


@dataclass(frozen=True, slots=True)
class Replay:
    status: int
    body: bytes


def request_hash(payload: Any) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


class IdempotencyKeys:
    def __init__(self, engine: Engine, *, ttl_s: float, abandon_after_s: float = 60.0) -> None:
        self._engine = engine
        self._writer = writer(engine)
        self._single_statement = single_statement_writer(engine)
        self._ttl_s = ttl_s
        self._abandon_after_s = abandon_after_s

    def claim(self, user: str, key: str, digest: str) -> Claim | Replay:
        for _ in range(3):
            now = time.time()
            try:
                with self._single_statement.begin() as conn:
                    row_id: int = conn.execute(
                        insert(keys)
                        .values(
                            username=user,
                            key=key,
                            request_hash=digest,
                            status="in_flight",
                            created_at=now,
                        )
                        .returning(keys.c.id)
                    ).scalar_one()
                return Claim(int(row_id))
            except IntegrityError:
                pass
            outcome = self._existing(user, key, digest, now)
            if outcome is not None:
                return outcome
        raise ApiError(409, "this Idempotency-Key is contended; retry the request shortly")

    def _existing(self, user: str, key: str, digest: str, now: float) -> Claim | Replay | None:
        """What to do about a key someone already claimed (``None``: it is gone, claim again)."""
        with self._writer.begin() as conn:
            row = conn.execute(
                select(keys).where(keys.c.username == user, keys.c.key == key)
            ).first()
            if row is None:
                return None
            if row.created_at < now - self._ttl_s:
                conn.execute(delete(keys).where(keys.c.id == row.id))
                return None
            if row.request_hash != digest:
                raise ApiError(
                    422,
                    "this Idempotency-Key was already used with a different request body; "
                    "use a new key for a new request",
                    field="Idempotency-Key",
                )
            if row.status == "done":
                return Replay(int(row.response_status), str(row.response_body).encode())
            if row.created_at < now - self._abandon_after_s:
                # The owner died mid-request (nothing was committed with the key): take over.
                taken = conn.execute(
                    update(keys)
                    .where(keys.c.id == row.id, keys.c.status == "in_flight")
                    .values(created_at=now)
                ).rowcount
                if taken == 1:
                    return Claim(int(row.id))
        raise ApiError(
            409, "a request with this Idempotency-Key is still in progress; retry it shortly"
        )

    def complete(
        self, conn: Connection, claim: Claim, status: int, body: bytes, job_id: str
    ) -> None:
        conn.execute(
            update(keys)
            .where(keys.c.id == claim.row_id)
            .values(
                status="done", response_status=status, response_body=body.decode(), job_id=job_id
            )
        )

    def release(self, claim: Claim) -> None:
        with self._writer.begin() as conn:
            conn.execute(
                delete(keys).where(keys.c.id == claim.row_id, keys.c.status == "in_flight")
            )

    def purge(self, now: float | None = None) -> int:
        cutoff = (now if now is not None else time.time()) - self._ttl_s
        with self._writer.begin() as conn:
            return int(conn.execute(delete(keys).where(keys.c.created_at < cutoff)).rowcount)
