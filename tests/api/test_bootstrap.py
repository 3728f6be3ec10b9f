"""The first admin token and the settings that refuse placeholder secrets."""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from api.bootstrap import ensure_admin_token, write_config
from api.db import make_engine
from api.settings import Settings
from api.tokens import lookup


def settings_for(tmp_path: Path, sqlite_url: str, **extra: object) -> Settings:
    return Settings(
        database_url=sqlite_url,
        data_dir=tmp_path,
        config_path=tmp_path / "cfg" / "jigsaw" / "config.toml",
        port=9999,
        **extra,  # type: ignore[arg-type]
    )


def test_embedded_start_generates_a_token_and_writes_it_privately(
    tmp_path: Path, sqlite_url: str
) -> None:
    settings = settings_for(tmp_path, sqlite_url)
    engine = make_engine(sqlite_url)
    message = ensure_admin_token(settings, engine)
    config = settings.config_path
    assert str(config) in message
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o600
    values = tomllib.loads(config.read_text())
    assert values["url"] == "http://127.0.0.1:9999"
    principal = lookup(engine, values["token"])
    assert principal is not None and principal.is_admin
    # A second start neither regenerates nor rewrites.
    assert ensure_admin_token(settings, engine) == "an admin token exists"
    assert tomllib.loads(config.read_text())["token"] == values["token"]
    engine.dispose()


def test_a_private_config_token_is_adopted_and_other_keys_kept(
    tmp_path: Path, sqlite_url: str
) -> None:
    settings = settings_for(tmp_path, sqlite_url)
    write_config(settings.config_path, {"token": "jgs_mine_and_long_enough", "theme": "dark"})
    engine = make_engine(sqlite_url)
    assert "adopted" in ensure_admin_token(settings, engine)
    assert lookup(engine, "jgs_mine_and_long_enough") is not None
    assert tomllib.loads(settings.config_path.read_text())["theme"] == "dark"
    engine.dispose()


def test_a_world_readable_config_token_is_not_adopted(tmp_path: Path, sqlite_url: str) -> None:
    settings = settings_for(tmp_path, sqlite_url)
    write_config(settings.config_path, {"token": "jgs_leaked_token_value"})
    os.chmod(settings.config_path, 0o644)
    engine = make_engine(sqlite_url)
    assert "generated" in ensure_admin_token(settings, engine)
    assert lookup(engine, "jgs_leaked_token_value") is None
    assert stat.S_IMODE(os.stat(settings.config_path).st_mode) == 0o600
    engine.dispose()


def test_the_bootstrap_token_from_the_environment_is_registered(
    tmp_path: Path, sqlite_url: str
) -> None:
    settings = settings_for(tmp_path, sqlite_url, admin_token="x" * 32)
    engine = make_engine(sqlite_url)
    assert "registered" in ensure_admin_token(settings, engine)
    assert lookup(engine, "x" * 32) is not None
    assert not settings.config_path.exists()
    engine.dispose()


@pytest.mark.parametrize("secret", ["changeme", "secret", "short"])
def test_placeholder_secrets_are_refused_outside_development(secret: str) -> None:
    with pytest.raises(ValidationError, match="placeholder"):
        Settings(environment="production", admin_token=secret)
    assert Settings(environment="development", admin_token=secret).admin_token is not None


def test_data_dir_honours_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("JIGSAW_DATA_DIR", raising=False)
    monkeypatch.delenv("JIGSAW_DATABASE_URL", raising=False)
    settings = Settings()
    assert settings.resolved_database_url == f"sqlite:///{tmp_path}/data/jigsaw/jigsaw.db"
    assert settings.config_path == tmp_path / "config" / "jigsaw" / "config.toml"


def test_the_config_file_round_trips_any_toml_value(tmp_path: Path) -> None:
    """Written with tomli-w: quotes, backslashes, non-ASCII text and nested tables survive."""
    values = {
        "url": "http://127.0.0.1:8765",
        "token": 'jgs_"quoted"\\back\nslash',
        "note": "café ☕",
        "retries": 3,
        "verbose": True,
        "profiles": {"lab": {"url": "http://lab:8765", "ports": [1, 2]}},
    }
    path = tmp_path / "jigsaw" / "config.toml"
    write_config(path, values)
    assert tomllib.loads(path.read_text(encoding="utf-8")) == values
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not path.with_name("config.toml.partial").exists()
