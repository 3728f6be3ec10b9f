"""API tokens: generated with ``secrets``, stored only as SHA-256 hashes, checked in constant
time. ``create_token_offline`` lets ``jigsaw-cli token create --offline`` bootstrap a server's
database directly (normally tokens come from ``POST /api/v1/tokens``)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Engine, insert, select

from api.db import make_engine, writer
from api.models import api_tokens

SCOPES = ("admin", "user", "worker")
TOKEN_PREFIX = "jgs_"


class InvalidScopeError(ValueError):
    def __init__(self, scope: str) -> None:
        super().__init__(f"unknown scope {scope!r}; scopes are {', '.join(SCOPES)}")
        self.scope = scope


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the token's user and what it may do."""

    user: str
    scopes: frozenset[str]
    token_name: str

    @property
    def is_admin(self) -> bool:
        return "admin" in self.scopes


@dataclass(frozen=True, slots=True)
class IssuedToken:
    token: str
    name: str
    user: str
    scopes: tuple[str, ...]


def generate_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(scopes))
    for scope in chosen:
        if scope not in SCOPES:
            raise InvalidScopeError(scope)
    return chosen


def register_token(
    engine: Engine, token: str, *, name: str, user: str, scopes: Iterable[str]
) -> IssuedToken:
    """Store the hash of a token the caller already holds (bootstrap, tests)."""
    chosen = check_scopes(scopes)
    with writer(engine).begin() as conn:
        conn.execute(
            insert(api_tokens).values(
                name=name,
                username=user,
                scopes=list(chosen),
                token_hash=hash_token(token),
                created_at=time.time(),
            )
        )
    return IssuedToken(token, name, user, chosen)


def create_token(engine: Engine, *, name: str, user: str, scopes: Iterable[str]) -> IssuedToken:
    return register_token(engine, generate_token(), name=name, user=user, scopes=scopes)


def lookup(engine: Engine, token: str) -> Principal | None:
    """The principal a bearer token stands for, or ``None`` (unknown or revoked)."""
    presented = hash_token(token)
    query = select(
        api_tokens.c.token_hash, api_tokens.c.username, api_tokens.c.scopes, api_tokens.c.name
    ).where(api_tokens.c.token_hash == presented, api_tokens.c.revoked_at.is_(None))
    with engine.connect() as conn:
        row = conn.execute(query).first()
    # The index finds the row; the final equality check does not leak timing either way.
    if row is None or not hmac.compare_digest(row.token_hash, presented):
        return None
    return Principal(row.username, frozenset(row.scopes), row.name)


def admin_token_exists(engine: Engine) -> bool:
    query = select(api_tokens.c.scopes).where(api_tokens.c.revoked_at.is_(None))
    with engine.connect() as conn:
        return any("admin" in scopes for scopes in conn.execute(query).scalars())


def create_token_offline(
    *, name: str, user: str, scopes: Iterable[str], database_url: str | None = None
) -> IssuedToken:
    """Create a token straight in the database named by the settings (or ``database_url``),
    migrating it first. For bootstrap on the server machine only."""
    from api.migrate import upgrade_to_head
    from api.settings import Settings

    engine = make_engine(database_url or Settings().resolved_database_url)
    try:
        upgrade_to_head(engine)
        return create_token(engine, name=name, user=user, scopes=scopes)
    finally:
        engine.dispose()
