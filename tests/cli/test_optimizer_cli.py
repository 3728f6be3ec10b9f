"""``--optimizer`` from the CLI, as a flag or a job-file field: it reaches the spec, ``describe``
shows it with the rule an adaptive batch scales its learning rate by, and a mistake is one
line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import Cli, one_line_error, small_job, submit_json

pytestmark = pytest.mark.integration


def test_the_optimizer_flag_reaches_the_spec_and_describe_shows_it(cli: Cli) -> None:
    job = submit_json(
        cli, *small_job("adamw"), "--optimizer", "adamw", "--learning-rate", "0.003",
        "--batch-policy", "adaptive", "--min-global-batch", "32", "--max-global-batch", "128",
    )  # fmt: skip
    spec = job["spec"]
    assert isinstance(spec, dict)
    assert (spec["optimizer"], spec["learning_rate"]) == ("adamw", 0.003)
    described = cli("describe", str(job["id"]))
    assert described.returncode == 0, described.stderr
    assert "adamw, learning rate 0.003 at global batch 64, scaled by the square-root rule" in (
        " ".join(described.stdout.split())
    )
    plain = submit_json(cli, *small_job("plain"))
    assert plain["spec"]["optimizer"] == "sgd"  # type: ignore[index]
    assert "sgd, learning rate 0.05" in cli("describe", str(plain["id"])).stdout


def test_a_job_file_gives_the_optimizer_and_a_flag_overrides_it(cli: Cli, tmp_path: Path) -> None:
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(
        yaml.safe_dump(
            {"name": "f", "model": "mlp", "workers": 2, "iterations": 10, "optimizer": "adamw"}
        )
    )
    assert submit_json(cli, "-f", str(spec_file))["spec"]["optimizer"] == "adamw"  # type: ignore[index]
    overridden = submit_json(cli, "-f", str(spec_file), "--optimizer", "sgd")
    assert overridden["spec"]["optimizer"] == "sgd"  # type: ignore[index]


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--optimizer", "adam"], "error: --optimizer: Input should be 'sgd' or 'adamw'"),
        (["--optimizer", "adamw", "--parallelism", "pipeline"], "data parallel only"),
    ],
    ids=["unknown", "on a pipeline"],
)
def test_bad_optimizer_flags_are_one_line_naming_it(cli: Cli, flags: list[str], words: str) -> None:
    result = cli("submit", *small_job("bad"), *flags)
    assert result.returncode == 2, result.stderr
    line = one_line_error(result.stderr)
    assert "optimizer" in line and words in line, line
    assert result.stdout == ""
