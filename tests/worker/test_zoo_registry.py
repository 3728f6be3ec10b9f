"""The zoo's registry is one explicit list: no import cycle, no registration on import."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from worker.zoo import ZOO, ZooModel, load_workload
from worker.zoo.registry import ZOO_MODELS, index_by_name
from worker.zoo.small import build_mlp

ZOO_DIR = Path(__file__).resolve().parents[2] / "worker" / "zoo"


def zoo_imports(path: Path) -> set[str]:
    """The ``worker.zoo`` modules ``path`` imports (``worker.zoo`` itself is the package)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("worker.zoo"):
            found.add(str(node.module))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("worker.zoo"))
    return found


def module_graph() -> dict[str, set[str]]:
    return {
        f"worker.zoo.{path.stem}": zoo_imports(path)
        for path in sorted(ZOO_DIR.glob("*.py"))
        if path.stem != "__init__"
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    visiting: list[str] = []
    done: set[str] = set()

    def visit(module: str) -> list[str] | None:
        if module in visiting:
            return [*visiting[visiting.index(module) :], module]
        if module in done or module not in graph:
            return None
        visiting.append(module)
        for target in sorted(graph[module]):
            cycle = visit(target)
            if cycle:
                return cycle
        visiting.pop()
        done.add(module)
        return None

    for module in graph:
        cycle = visit(module)
        if cycle:
            return cycle
    return None


def test_zoo_modules_import_each_other_without_a_cycle() -> None:
    graph = module_graph()
    assert "worker.zoo.registry" in graph and len(graph) >= 6
    assert find_cycle(graph) is None, find_cycle(graph)
    # Only the registry knows the models; no model module reaches back to it or the package.
    for module, targets in graph.items():
        if module != "worker.zoo.registry":
            assert not targets & {"worker.zoo", "worker.zoo.registry"}, module


def test_cycle_finder_sees_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_zoo_module_is_imported_for_its_side_effects() -> None:
    for path in ZOO_DIR.glob("*.py"):
        assert 'import_module("worker' not in path.read_text(), path


def test_a_model_module_imports_cleanly_on_its_own() -> None:
    # Importing one model module first (as a user entrypoint might) must not trip over a
    # half-initialised registry.
    code = "import worker.zoo.gpt as g, worker.zoo as z; print(len(z.ZOO), g.build_gpt_small)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{len(ZOO_MODELS)} ")


@pytest.mark.parametrize("model", ZOO_MODELS, ids=lambda m: m.name)
def test_declared_block_count_is_what_the_builder_builds(model: ZooModel) -> None:
    with torch.device("meta"):
        workload = load_workload(model.name)
    assert workload.name == model.name
    assert workload.num_blocks == model.blocks == ZOO[model.name].blocks


@pytest.mark.parametrize("model", ZOO_MODELS, ids=lambda m: m.name)
def test_the_profile_records_the_training_split_the_workers_build(model: ZooModel) -> None:
    """The planner refuses a global batch larger than the profile's ``train_samples`` at
    submit; the samplers refuse it at launch. The two numbers must be the same."""
    from jigsaw.planning.catalog import default_catalog

    profile = default_catalog().lookup(model.name).profile
    assert profile is not None
    assert profile.train_samples == len(load_workload(model.name).make_data().train)


def test_a_name_listed_twice_is_refused() -> None:
    twice = [ZooModel("mlp", build_mlp, blocks=4), ZooModel("mlp", build_mlp, blocks=4)]
    with pytest.raises(ValueError, match="'mlp' is listed twice"):
        index_by_name(twice)


def test_the_catalog_knows_every_zoo_model_with_the_block_count_the_workers_build() -> None:
    """The control plane resolves plans against the catalog's K; the workers train the zoo's
    model. The two must agree for every model, or a resolved plan would not fit."""
    from jigsaw.planning.catalog import ModelKind, default_catalog

    catalog = default_catalog()
    for model in ZOO_MODELS:
        entry = catalog.lookup(model.name)
        assert entry.kind is ModelKind.ZOO, model.name
        assert entry.num_blocks == model.blocks, model.name


def test_a_worker_refuses_a_zoo_model_whose_k_disagrees_with_the_catalog() -> None:
    from jigsaw.model.errors import InvalidSpecError
    from worker.runtime.gang_worker import check_against_catalog

    check_against_catalog("digits_cnn", 4)
    check_against_catalog("my_pkg.models:build", 7)  # an entrypoint: K is whatever it built
    with pytest.raises(InvalidSpecError, match="catalog says 4"):
        check_against_catalog("digits_cnn", 5)
