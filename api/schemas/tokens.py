"""Token bodies. The token itself appears exactly once: in the creation response."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from api.schemas.common import Forbidding, Public, Text

Scope = Literal["admin", "user", "worker"]


class TokenCreate(Forbidding):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [{"name": "alice-laptop", "user": "alice", "scopes": ["user"]}]
        },
    )

    name: Text = Field(min_length=1, max_length=128)
    user: Text = Field(min_length=1, max_length=128)
    scopes: list[Scope] = Field(default=["user"], min_length=1, max_length=3)


class TokenIssued(Public):
    token: str = Field(description="shown once; only its SHA-256 is stored")
    id: int = Field(description="what `POST /api/v1/tokens/{token_id}/revoke` takes")
    name: str
    user: str
    scopes: list[str]


class TokenPublic(Public):
    """A token as the server knows it: never the token, never its hash."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": 3,
                    "name": "alice-laptop",
                    "user": "alice",
                    "scopes": ["user"],
                    "created_at": "2026-11-23T10:00:00Z",
                    "revoked_at": None,
                }
            ]
        }
    )

    id: int
    name: str
    user: str
    scopes: list[str]
    created_at: str = Field(description="ISO 8601, UTC")
    revoked_at: str | None = Field(description="ISO 8601, UTC; null while the token works")


class TokenList(Public):
    items: list[TokenPublic]
