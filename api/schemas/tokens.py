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
    name: str
    user: str
    scopes: list[str]
