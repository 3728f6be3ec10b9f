"""The token cache: who a bearer token belongs to, remembered for a few seconds."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sqlalchemy import Engine

from api.tokens import Principal, hash_token, lookup

PRINCIPAL_CACHE_SECONDS = 5.0
"""A revoked token keeps working at most this long (saves a query on every request)."""


class PrincipalCache:
    def __init__(
        self,
        engine: Engine,
        ttl_s: float = PRINCIPAL_CACHE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self._ttl_s = ttl_s
        self._monotonic = monotonic
        self._entries: dict[str, tuple[float, Principal]] = {}
        self._lock = threading.Lock()

    def cached(self, token: str) -> Principal | None:
        """The principal if it was looked up within the TTL (no database access)."""
        with self._lock:
            entry = self._entries.get(hash_token(token))
        return entry[1] if entry is not None and entry[0] > self._monotonic() else None

    def forget(self, token_hash: str) -> None:
        """Drop a revoked token's entry, so this process refuses it at once (other processes
        within the TTL)."""
        with self._lock:
            self._entries.pop(token_hash, None)

    def get(self, token: str) -> Principal | None:
        cached = self.cached(token)
        if cached is not None:
            return cached
        key = hash_token(token)
        now = self._monotonic()
        principal = lookup(self._engine, token)
        if principal is not None:
            with self._lock:
                if len(self._entries) > 10_000:
                    self._entries.clear()
                self._entries[key] = (now + self._ttl_s, principal)
        return principal
