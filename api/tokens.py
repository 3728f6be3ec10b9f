"""API tokens: generated with ``secrets``, stored only as SHA-256 hashes, checked in constant
time, revoked by id (the row stays, with ``revoked_at``, for the audit trail).
``create_token_offline`` lets ``jigsaw-cli token create --offline`` bootstrap a server's
database directly (normally tokens come from ``POST /api/v1/tokens``)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Engine, insert, select, update

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
    id: int


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """What the server knows of a token: everything but the token (and its hash stays
    internal: ``token_hash`` is for cache eviction, never for a response)."""

    id: int
    name: str
    user: str
    scopes: tuple[str, ...]
    created_at: float
    revoked_at: float | None
    token_hash: str

    @property
    def is_active_admin(self) -> bool:
        return self.revoked_at is None and "admin" in self.scopes


class TokenNotFoundError(LookupError):
    def __init__(self, token_id: int) -> None:
        super().__init__(f"no token has id {token_id}; `jigsaw-cli token list` shows the ids")
        self.token_id = token_id


class LastAdminTokenError(RuntimeError):
    """Revoking it would leave no way to administer the server."""


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
        token_id: int = conn.execute(
            insert(api_tokens)
            .values(
                name=name,
                username=user,
                scopes=list(chosen),
                token_hash=hash_token(token),
                created_at=time.time(),
            )
            .returning(api_tokens.c.id)
        ).scalar_one()
    return IssuedToken(token, name, user, chosen, int(token_id))


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


def list_tokens(engine: Engine, *, include_revoked: bool = False) -> list[TokenRecord]:
    """Tokens by id (oldest first); revoked ones only when asked."""
    query = select(api_tokens).order_by(api_tokens.c.id)
    if not include_revoked:
        query = query.where(api_tokens.c.revoked_at.is_(None))
    with engine.connect() as conn:
        return [_record(row) for row in conn.execute(query)]


def revoke_token(engine: Engine, token_id: int, *, now: float | None = None) -> TokenRecord:
    """Mark a token revoked; it stops authenticating (servers cache a lookup for at most
    ``PRINCIPAL_CACHE_SECONDS``). Revoking a revoked token changes nothing and returns it.
    Refuses to revoke the last active admin token, which would lock every admin out."""
    at = time.time() if now is None else now
    with writer(engine).begin() as conn:
        # Lock every active token: two concurrent revocations of the last two admin tokens
        # must not both see the other one still active (SQLite's BEGIN IMMEDIATE serializes).
        active = [
            _record(row)
            for row in conn.execute(
                select(api_tokens).where(api_tokens.c.revoked_at.is_(None)).with_for_update()
            )
        ]
        row = conn.execute(select(api_tokens).where(api_tokens.c.id == token_id)).first()
        if row is None:
            raise TokenNotFoundError(token_id)
        record = _record(row)
        if record.revoked_at is not None:
            return record
        other_admins = [t for t in active if t.is_active_admin and t.id != token_id]
        if record.is_active_admin and not other_admins:
            raise LastAdminTokenError(
                f"token {token_id} ({record.name!r}) is the last active admin token; create "
                "another admin token before revoking it"
            )
        conn.execute(update(api_tokens).where(api_tokens.c.id == token_id).values(revoked_at=at))
    return replace(record, revoked_at=at)


def _record(row: Any) -> TokenRecord:
    return TokenRecord(
        id=int(row.id),
        name=row.name,
        user=row.username,
        scopes=tuple(row.scopes),
        created_at=float(row.created_at),
        revoked_at=row.revoked_at,
        token_hash=row.token_hash,
    )


def admin_token_exists(engine: Engine) -> bool:
    query = select(api_tokens.c.scopes).where(api_tokens.c.revoked_at.is_(None))
    with engine.connect() as conn:
        granted: Sequence[list[str]] = conn.execute(query).scalars().all()
    return any("admin" in scopes for scopes in granted)


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
