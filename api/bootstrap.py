"""The first admin token, so a fresh server can be used at all. Never a fixed secret.

- ``JIGSAW_ADMIN_TOKEN`` set: its hash is registered as an admin token (if not already).
- Embedded default (SQLite) without any admin token: if the CLI config file already holds a
  token and is private to its owner, that token becomes the admin token (the CLI keeps
  working against a fresh database); otherwise a new token is generated and written, with
  ``url``, into ``$XDG_CONFIG_HOME/jigsaw/config.toml`` (mode 0600).
- Postgres without any admin token: nothing is generated; the log says how to create one.
"""

from __future__ import annotations

import logging
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

import tomli_w
from sqlalchemy import Engine

from api.settings import Settings
from api.tokens import admin_token_exists, generate_token, lookup, register_token

log = logging.getLogger(__name__)


def ensure_admin_token(settings: Settings, engine: Engine) -> str:
    """Make sure an admin token exists; returns one line saying what was done."""
    if settings.admin_token is not None:
        token = settings.admin_token.get_secret_value()
        if lookup(engine, token) is None:
            register_token(engine, token, name="bootstrap", user="admin", scopes=["admin"])
            return "registered JIGSAW_ADMIN_TOKEN as an admin token"
        return "JIGSAW_ADMIN_TOKEN is a known admin token"
    if admin_token_exists(engine):
        return "an admin token exists"
    if not settings.is_sqlite:
        return (
            "no admin token exists: set JIGSAW_ADMIN_TOKEN, or run "
            "`jigsaw-cli token create --offline --scope admin` on this machine"
        )
    path = settings.config_path
    config = read_config(path)
    existing = config.get("token")
    if isinstance(existing, str) and existing and is_private(path):
        register_token(engine, existing, name="embedded", user="admin", scopes=["admin"])
        return f"adopted the token in {path} as the admin token"
    token = generate_token()
    register_token(engine, token, name="embedded", user="admin", scopes=["admin"])
    write_config(path, {**config, "url": settings.public_url, "token": token})
    return f"generated an admin token and wrote it (with the url) to {path} (mode 0600)"


def read_config(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as error:
        log.warning("ignoring unreadable %s: %s", path, error)
        return {}


def is_private(path: Path) -> bool:
    """Readable by its owner only (a group/world-readable token may have leaked)."""
    info = path.stat()
    return info.st_uid == os.getuid() and not info.st_mode & (stat.S_IRWXG | stat.S_IRWXO)


def write_config(path: Path, values: dict[str, Any]) -> None:
    """Write atomically with mode 0600 (created that way, never chmod-ed after the fact)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_name(path.name + ".partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        tomli_w.dump(values, handle)
    os.chmod(partial, 0o600)
    os.replace(partial, path)
