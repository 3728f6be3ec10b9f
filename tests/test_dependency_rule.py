"""The pure core imports no framework and no outer layer (checked on the AST, not by grep)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "jigsaw"
FORBIDDEN = {
    "api",
    "worker",
    "cli",
    "fastapi",
    "starlette",
    "sqlalchemy",
    "ray",
    "torch",
    "alembic",
    "pydantic",
    "httpx",
    "typer",
    "rich",
}


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


CORE_FILES = sorted(CORE.rglob("*.py"))


def test_core_has_modules() -> None:
    assert len(CORE_FILES) > 10


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(CORE)))
def test_core_module_imports_no_framework(path: Path) -> None:
    bad = imported_roots(path) & FORBIDDEN
    assert not bad, f"{path} imports {sorted(bad)}"


def test_checker_catches_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "bad.py"
    sample.write_text("import torch.nn as nn\nfrom sqlalchemy import select\n")
    assert imported_roots(sample) >= {"torch", "sqlalchemy"}
