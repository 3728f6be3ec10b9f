"""Gavel's throughputs file: a bad pair entry or sharing mode is refused with the file, the
line, the keys and what is wrong."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from jigsaw.model.errors import TraceFormatError
from jigsaw.traces import GavelThroughputs

EXCERPT = Path(__file__).resolve().parents[2] / "data" / "gavel_throughputs_excerpt.json"
HOST = "('ResNet-18 (batch size 16)', 1)"
PARTNER = "('A3C', 1)"


def _excerpt() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EXCERPT.read_text())
    return data


def _write(tmp_path: Path, data: dict[str, Any]) -> tuple[Path, str]:
    text = json.dumps(data, indent=1)
    path = tmp_path / "throughputs.json"
    path.write_text(text)
    return path, text


def _line_of(text: str, *keys: str) -> int:
    position = 0
    for key in keys:
        position = text.index(json.dumps(key), position)
    return text.count("\n", 0, position) + 1


def test_the_excerpt_loads_as_concurrent_pairs() -> None:
    table = GavelThroughputs.load(EXCERPT)
    assert table.sharing == "concurrent"
    assert table.paired[("v100", "ResNet-18 (batch size 16)", 1, "A3C", 1)][1] > 0


def test_a_file_may_say_its_pairs_were_time_sliced(tmp_path: Path) -> None:
    data = {"sharing": "timeslice", **_excerpt()}
    path, _ = _write(tmp_path, data)
    assert GavelThroughputs.load(path).sharing == "timeslice"


def test_an_unknown_sharing_mode_is_named(tmp_path: Path) -> None:
    path, _ = _write(tmp_path, {"sharing": "mps", **_excerpt()})
    with pytest.raises(TraceFormatError) as error:
        GavelThroughputs.load(path)
    assert str(error.value) == (
        f"{path}:2: 'sharing': unknown sharing mode 'mps'; choose one of: timeslice, concurrent"
    )


def test_a_pair_naming_an_unknown_job_type_is_named(tmp_path: Path) -> None:
    data = _excerpt()
    entry = data["v100"][HOST]
    entry["('Mystery', 1)"] = entry.pop(PARTNER)
    path, text = _write(tmp_path, data)
    with pytest.raises(TraceFormatError) as error:
        GavelThroughputs.load(path)
    assert error.value.path == str(path)
    assert error.value.line == _line_of(text, "v100", HOST, "('Mystery', 1)")
    assert f"'v100' -> \"{HOST}\" -> \"('Mystery', 1)\"" in str(error.value)
    assert "unknown Gavel job type 'Mystery'" in str(error.value)


def test_a_pair_naming_a_job_without_its_own_entry_is_named(tmp_path: Path) -> None:
    data = _excerpt()
    entry = data["v100"][HOST]
    entry["('CycleGAN', 1)"] = entry.pop(PARTNER)
    path, _ = _write(tmp_path, data)
    with pytest.raises(TraceFormatError, match="'CycleGAN' x1, which has no entry of its own"):
        GavelThroughputs.load(path)


@pytest.mark.parametrize(
    ("rate", "what"),
    [(-1.5, "must be >= 0 steps per second, got -1.5"), (math.nan, "must be finite, got nan")],
)
def test_a_bad_pair_rate_is_named(tmp_path: Path, rate: float, what: str) -> None:
    data = _excerpt()
    data["v100"][HOST][PARTNER][1] = rate
    path, text = _write(tmp_path, data)
    with pytest.raises(TraceFormatError) as error:
        GavelThroughputs.load(path)
    assert error.value.line == _line_of(text, "v100", HOST, PARTNER)
    assert str(error.value).endswith(f'"{HOST}" -> "{PARTNER}": a rate {what}')


def test_an_infinite_alone_rate_is_named(tmp_path: Path) -> None:
    data = _excerpt()
    data["v100"][HOST]["null"] = math.inf
    path, text = _write(tmp_path, data)
    with pytest.raises(TraceFormatError, match="a rate must be finite, got inf") as error:
        GavelThroughputs.load(path)
    assert error.value.line == _line_of(text, "v100", HOST)
