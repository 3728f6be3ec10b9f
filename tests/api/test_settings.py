"""One settings reader: the service and the Ray runtime read JIGSAW_* with pydantic-settings,
agree on every variable both read, and reject a bad value with one line that names it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from api.settings import Settings, read_settings
from jigsaw.model.environment import SHARING_MODES, InvalidSettingError
from jigsaw.oracle import SharingSettings
from worker.runtime.settings import RuntimeSettings

SHARED = {
    "data_dir",
    "gpus",
    "gpu_type",
    "lease_iterations",
    "worker_memory_gib",
    "sharing",
    "interference",
}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for key in list(os.environ):
        if key.startswith("JIGSAW_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return monkeypatch


def test_both_readers_declare_the_shared_variables_alike() -> None:
    service, runtime = Settings.model_fields, RuntimeSettings.model_fields
    assert set(service) & set(runtime) == SHARED
    for name in sorted(SHARED):
        assert service[name].annotation == runtime[name].annotation, name
        assert service[name].metadata == runtime[name].metadata, name  # the same bounds


def test_both_readers_have_the_same_defaults(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    service, runtime = Settings(), RuntimeSettings()
    assert service.data_dir == runtime.data_dir == tmp_path / "xdg" / "jigsaw"
    assert runtime.checkpoint_dir == runtime.data_dir / "ckpt"
    assert (service.gpus, service.gpu_type, service.lease_iterations) == (4, "v100", 50)
    assert (runtime.gpus, runtime.gpu_type, runtime.lease_iterations) == (4, "v100", 50)
    assert runtime.local_gpus == runtime.gpus


def test_both_readers_read_the_same_values(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("JIGSAW_DATA_DIR", str(tmp_path / "data"))
    clean_env.setenv("JIGSAW_GPUS", "8")
    clean_env.setenv("JIGSAW_GPU_TYPE", "a100")
    clean_env.setenv("JIGSAW_LEASE_ITERATIONS", "20")
    clean_env.setenv("JIGSAW_SHARING", "concurrent")
    clean_env.setenv("JIGSAW_INTERFERENCE", "0.2")
    clean_env.setenv("JIGSAW_CONTROL_EVERY", "")  # empty counts as unset, in both
    service, runtime = Settings(), RuntimeSettings()
    for name in sorted(SHARED):
        assert getattr(service, name) == getattr(runtime, name), name
    assert runtime.gpus == 8 and runtime.checkpoint_dir == tmp_path / "data" / "ckpt"
    assert runtime.control_every == 25
    assert (runtime.sharing, runtime.interference) == ("concurrent", 0.2)
    assert service.sharing_settings == SharingSettings("concurrent", 0.2)
    assert RuntimeSettings.from_env(dict(os.environ)) == runtime


def test_sharing_defaults_to_time_slicing_without_penalty(clean_env: pytest.MonkeyPatch) -> None:
    assert Settings().sharing_settings == SharingSettings("timeslice", 0.0)
    assert get_args(Settings.model_fields["sharing"].annotation) == SHARING_MODES


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("JIGSAW_GPUS", "0", "JIGSAW_GPUS must be at least 1, got '0'"),
        ("JIGSAW_GPUS", "100001", "JIGSAW_GPUS must be at most 100000, got '100001'"),
        ("JIGSAW_GPUS", "four", "JIGSAW_GPUS must be a number (an integer), got 'four'"),
        ("JIGSAW_LEASE_ITERATIONS", "0", "JIGSAW_LEASE_ITERATIONS must be positive, got '0'"),
        (
            "JIGSAW_SHARING",
            "mps",
            "JIGSAW_SHARING must be 'timeslice' or 'concurrent', got 'mps'",
        ),
        ("JIGSAW_INTERFERENCE", "1.5", "JIGSAW_INTERFERENCE must be at most 0.9, got '1.5'"),
        ("JIGSAW_INTERFERENCE", "nan", "JIGSAW_INTERFERENCE must be a number, got 'nan'"),
    ],
)
def test_both_readers_reject_a_shared_variable_with_the_same_line(
    clean_env: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    clean_env.setenv(variable, value)
    with pytest.raises(InvalidSettingError) as service:
        read_settings()
    with pytest.raises(InvalidSettingError) as runtime:
        RuntimeSettings()
    assert str(service.value) == str(runtime.value) == message
    assert runtime.value.field == variable


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("JIGSAW_EXECUTOR", "k8s", "JIGSAW_EXECUTOR must be 'simulated' or 'ray', got 'k8s'"),
        ("JIGSAW_ROUND_SECONDS", "-1", "JIGSAW_ROUND_SECONDS must be positive, got '-1'"),
        ("JIGSAW_QUEUE_QUOTAS", "{research: 8}", "JIGSAW_QUEUE_QUOTAS: not JSON"),
        (
            "JIGSAW_USER_QUOTAS",
            '{"alice": "many"}',
            "JIGSAW_USER_QUOTAS['alice'] must be a number (an integer), got 'many'",
        ),
        ("JIGSAW_POLICY_OPTIONS", "[1, 2]", "JIGSAW_POLICY_OPTIONS must be a JSON object"),
    ],
)
def test_the_service_names_the_variable_and_what_it_accepts(
    clean_env: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    clean_env.setenv(variable, value)
    with pytest.raises(InvalidSettingError) as rejected:
        read_settings()
    assert str(rejected.value).startswith(message)


def test_json_settings_are_decoded(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("JIGSAW_QUEUE_QUOTAS", '{"research": 8}')
    clean_env.setenv("JIGSAW_POLICY_OPTIONS", '{"min_run_s": 30}')
    settings = read_settings()
    assert settings.queue_quotas == {"research": 8}
    assert settings.policy_options == {"min_run_s": 30}


def test_every_rejected_value_is_named_at_once(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("JIGSAW_PORT", "0")
    clean_env.setenv("JIGSAW_GPUS_PER_NODE", "x")
    with pytest.raises(InvalidSettingError) as rejected:
        read_settings()
    assert str(rejected.value) == (
        "JIGSAW_PORT must be at least 1, got '0'; "
        "JIGSAW_GPUS_PER_NODE must be a number (an integer), got 'x'"
    )


def test_a_placeholder_secret_is_named_without_a_made_up_variable(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("JIGSAW_ENVIRONMENT", "production")
    clean_env.setenv("JIGSAW_ADMIN_TOKEN", "changeme")
    with pytest.raises(InvalidSettingError, match=r"^JIGSAW_ADMIN_TOKEN looks like a placeholder"):
        read_settings()


def test_paths_expand_the_home_directory(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("JIGSAW_DATA_DIR", "~/jigsaw-data")
    clean_env.setenv("JIGSAW_CHECKPOINT_DIR", "~/jigsaw-ckpt")
    home = Path.home()
    assert read_settings().data_dir == home / "jigsaw-data"
    assert RuntimeSettings().checkpoint_dir == home / "jigsaw-ckpt"


def test_runtime_settings_refuse_a_misspelt_keyword() -> None:
    with pytest.raises(TypeError, match="no setting lease_iteration"):
        RuntimeSettings(lease_iteration=3)


def start_up(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("JIGSAW_")}
    code = "from api.server import load_settings; load_settings(); print('started')"
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_a_bad_runtime_knob_stops_a_ray_service_at_start_with_one_line(tmp_path: Path) -> None:
    env = {"JIGSAW_DATA_DIR": str(tmp_path), "JIGSAW_EXECUTOR": "ray"}
    refused = start_up({**env, "JIGSAW_GPU_PER_WORKER": "2"})
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == (
        "jigsaw: invalid setting: JIGSAW_GPU_PER_WORKER must be at most 1.0, got '2'\n"
    )
    # The simulated service does not read the runtime's knobs.
    simulated = start_up({**env, "JIGSAW_EXECUTOR": "simulated", "JIGSAW_GPU_PER_WORKER": "2"})
    assert simulated.returncode == 0 and simulated.stdout == "started\n", simulated.stderr
