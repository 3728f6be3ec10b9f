"""Per-invocation helpers shared by the command modules."""

from __future__ import annotations

from cli.client import JigsawClient
from cli.config import load_config


def make_client() -> JigsawClient:
    return JigsawClient(load_config())
