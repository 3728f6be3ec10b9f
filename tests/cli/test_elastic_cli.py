"""Elastic jobs from the CLI: --min-workers, --max-workers, --batch-policy and the batch bounds
as flags or job-file fields; mistakes are one line naming the field; describe shows the size."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import Cli, one_line_error, small_job, submit_json

pytestmark = pytest.mark.integration


def test_elastic_flags_reach_the_spec_and_describe_shows_the_size(cli: Cli) -> None:
    job = submit_json(
        cli, *small_job("elastic", workers=2), "--min-workers", "1", "--max-workers", "4",
        "--batch-size", "12",
    )  # fmt: skip
    spec = job["spec"]
    assert isinstance(spec, dict)
    assert (spec["min_workers"], spec["max_workers"], spec["batch_policy"]) == (1, 4, "fixed")
    described = cli("describe", str(job["id"]))
    assert described.returncode == 0, described.stderr
    assert "elastic 1..4 workers, batch fixed" in described.stdout
    assert "Resizes" in described.stdout


def test_an_adaptive_job_file_is_read_with_its_bounds(cli: Cli, tmp_path: Path) -> None:
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(
        yaml.safe_dump(
            {
                "name": "adaptive",
                "model": "digits_cnn",
                "workers": 2,
                "iterations": 10,
                "max_workers": 3,
                "batch_policy": "adaptive",
                "min_global_batch": 32,
                "max_global_batch": 256,
            }
        )
    )
    spec = submit_json(cli, "-f", str(spec_file))["spec"]
    assert isinstance(spec, dict)
    assert (spec["batch_policy"], spec["min_global_batch"], spec["max_global_batch"]) == (
        "adaptive",
        32,
        256,
    )


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--min-workers", "3", "--max-workers", "2"], "min_workers"),
        (["--max-workers", "5"], "batch_size"),  # 2 x 32 does not split over 3 or 5
        (["--batch-policy", "adaptive"], "min_global_batch"),
        (["--max-workers", "4096"], "max_workers"),
    ],
)
def test_bad_elastic_flags_are_one_line_naming_the_field(
    cli: Cli, flags: list[str], field: str
) -> None:
    """Named as the user typed it: the flag (issue 30), never the spec's field name."""
    result = cli("submit", *small_job("bad", workers=2), *flags)
    assert result.returncode == 2, result.stderr
    said = one_line_error(result.stderr)
    assert "--" + field.replace("_", "-") in said and field not in said, said
    assert result.stdout == ""
