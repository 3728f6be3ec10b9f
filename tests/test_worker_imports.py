"""The worker is the control plane's client, never its part: nothing under ``worker/`` imports
``api`` (the store seam of the architecture pass), not even through ``importlib``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_dependency_rule import imported_roots

WORKER = Path(__file__).resolve().parents[1] / "worker"
WORKER_FILES = sorted(WORKER.rglob("*.py"))


def dynamic_imports(path: Path) -> set[str]:
    """Roots of ``import_module("x.y")`` / ``__import__("x")`` calls with a literal name."""
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = (
            node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        )
        first = node.args[0]
        if name in ("import_module", "__import__") and isinstance(first, ast.Constant):
            roots.add(str(first.value).split(".")[0])
    return roots


def test_worker_has_modules() -> None:
    assert len(WORKER_FILES) > 10


@pytest.mark.parametrize("path", WORKER_FILES, ids=lambda p: str(p.relative_to(WORKER)))
def test_worker_module_imports_nothing_from_api(path: Path) -> None:
    bad = (imported_roots(path) | dynamic_imports(path)) & {"api"}
    assert not bad, f"{path} imports the control plane ({sorted(bad)})"


def test_checker_catches_static_and_dynamic_imports(tmp_path: Path) -> None:
    sample = tmp_path / "bad.py"
    sample.write_text(
        "import importlib\nfrom api.store import SqlStore\nimportlib.import_module('api.db')\n"
    )
    assert "api" in imported_roots(sample)
    assert dynamic_imports(sample) == {"api"}
