"""Where the CLI finds its server and token: environment first, then the config file.

Never from command-line flags: a token on the command line is visible to every user in ``ps``.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from cli.errors import UsageError

DEFAULT_URL = "http://127.0.0.1:8765"


@dataclass(frozen=True, slots=True)
class CliConfig:
    url: str
    token: str | None
    source: str
    """Where the token came from (``JIGSAW_TOKEN`` or the config file path), for messages."""
    file_token: bool = False
    """The config file holds a token (used unless ``JIGSAW_TOKEN`` is set, even empty)."""


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "jigsaw" / "config.toml"


def read_config_file(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise UsageError(f"cannot read the config file {path}: {error}") from error
    values: dict[str, str] = {}
    for key in ("url", "token"):
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise UsageError(f"{path}: key {key!r} must be a string")
        if value:
            values[key] = value
    return values


def load_config() -> CliConfig:
    path = config_path()
    file_values = read_config_file(path)
    url = os.environ.get("JIGSAW_URL") or file_values.get("url") or DEFAULT_URL
    if "JIGSAW_TOKEN" in os.environ:
        # Set but empty means "no token", never "the config file's" (often an admin token).
        raw = os.environ["JIGSAW_TOKEN"]
        token = check_token(raw, "JIGSAW_TOKEN") if raw else None
        return CliConfig(url.rstrip("/"), token, "JIGSAW_TOKEN", file_token="token" in file_values)
    from_file = file_values.get("token")
    checked = check_token(from_file, str(path)) if from_file else None
    return CliConfig(url.rstrip("/"), checked, str(path), file_token=checked is not None)


def check_token(token: str, source: str) -> str:
    """A token is printable ASCII without spaces (what an HTTP header can carry)."""
    for position, char in enumerate(token):
        if not 0x21 <= ord(char) <= 0x7E:
            raise UsageError(
                f"the token from {source} has {_describe(char)} at position {position}; "
                "a token is printable ASCII without spaces or line breaks: copy it again"
            )
    return token


def _describe(char: str) -> str:
    if char in "\r\n":
        return "a line break"
    if char.isspace():
        return "a space"
    return f"the character {char!r}" if char.isprintable() else f"character U+{ord(char):04X}"
