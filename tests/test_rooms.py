"""The core's rooms and floors: each room of ``jigsaw/`` imports only its own room and the rooms
on the floors below it, and no two modules import each other, even through a function-level or
``TYPE_CHECKING`` import (checked on the AST). docs/ARCHITECTURE.md shows the same table."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "jigsaw"

# Lowest floor first. A room may import its own modules and the rooms on lower floors; rooms on
# one floor do not import each other.
FLOORS: list[set[str]] = [
    {"model"},
    {"efficiency"},
    {"oracle"},
    {"goodput", "traces"},
    {"planning"},
    {"policies.shared"},
    {"policies.speed"},
    {"policies.jigsaw_parts"},
    {"policies.allocator"},
    {"policies"},
    {"scheduling"},
    {"simulator"},
]
FLOOR_OF = {room: level for level, rooms in enumerate(FLOORS) for room in rooms}


def module_name(path: Path) -> str:
    parts = path.relative_to(CORE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room_of(module: str) -> str:
    """The deepest listed room that holds ``module`` (``jigsaw.policies.shared.gang`` is in
    ``policies.shared``; ``jigsaw.policies.fifo`` in ``policies``)."""
    inner = module.removeprefix("jigsaw.").split(".")
    for depth in range(len(inner), 0, -1):
        candidate = ".".join(inner[:depth])
        if candidate in FLOOR_OF:
            return candidate
    raise AssertionError(f"{module} lies in no room; add its room to FLOORS")


def jigsaw_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("jigsaw."))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("jigsaw."):
                found.add(node.module)
    return found


MODULES = {module_name(p): p for p in sorted(CORE.rglob("*.py")) if p.parent != CORE}
GRAPH = {name: jigsaw_imports(path) for name, path in MODULES.items()}


def test_the_root_holds_only_the_packages() -> None:
    loose = sorted(p.name for p in CORE.glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules at the root of jigsaw/: {loose}; give each a room"
    rooms = {p.name for p in CORE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms == {room.split(".")[0] for room in FLOOR_OF}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_runs_up_a_floor(module: str) -> None:
    own = room_of(module)
    upward = sorted(
        target
        for target in GRAPH[module]
        if room_of(target) != own and FLOOR_OF[room_of(target)] >= FLOOR_OF[own]
    )
    assert not upward, f"{module} (room {own}) imports up or across a floor: {upward}"


def test_no_import_circles() -> None:
    known = set(GRAPH)
    edges = {m: {t for t in ts if t in known and t != m} for m, ts in GRAPH.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    assert not circles, f"import circles: {circles}"


def test_the_floor_checker_sees_an_upward_import() -> None:
    assert room_of("jigsaw.policies.shared.gang") == "policies.shared"
    assert room_of("jigsaw.policies.fifo") == "policies"
    assert FLOOR_OF[room_of("jigsaw.scheduling.cycle")] > FLOOR_OF[room_of("jigsaw.model.plan")]
