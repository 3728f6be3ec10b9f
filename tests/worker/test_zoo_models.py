from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from jigsaw.model.errors import InvalidSpecError
from jigsaw.model.plan import full_backprop
from worker.spb.model_plans import model_plan
from worker.spb.thread_collectives import ThreadGroup
from worker.spb.trainer import SPBTrainer
from worker.spb.trainer_setup import TrainerConfig
from worker.zoo import ModelBuildError, UnknownModelError, Workload, list_models, load_workload
from worker.zoo.datasets import pydoc_corpus

EXPECTED = {
    "mlp": (4, (10,)),
    "digits_cnn": (4, (10,)),
    "resnet18_32": (4, (10,)),
    "resnet18_224": (4, (1000,)),
    "resnet50_32": (4, (10,)),
    "resnet50_224": (4, (1000,)),
    "vgg16_32": (5, (10,)),
    "vgg16_224": (5, (1000,)),
    "vgg16_32_fc": (6, (10,)),
    "gpt_small": (4, (64, 256)),
    "digits_wide_mlp": (4, (10,)),
}


def test_zoo_registers_exactly_the_names_the_scheduler_uses() -> None:
    assert set(list_models()) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_blocks_compose_into_the_full_model(name: str) -> None:
    with torch.device("meta"):
        workload = load_workload(name)
    blocks, out_shape = EXPECTED[name]
    assert workload.num_blocks == blocks == len(workload.block_names)
    output = workload.forward(workload.example_input(2, "meta"))
    assert tuple(output.shape) == (2, *out_shape)


def test_same_seed_gives_identical_weights_and_different_seed_does_not() -> None:
    a, b, c = (load_workload("mlp", seed=s) for s in (7, 7, 8))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a.parameters()[0], c.parameters()[0])


def test_text_corpus_is_real_prose_shipped_with_python() -> None:
    corpus = pydoc_corpus()
    assert len(corpus) > 400_000 and b"the" in corpus and corpus == pydoc_corpus()
    data = load_workload("gpt_small").make_data()
    inputs, targets = data.train.fetch(torch.tensor([0]))
    assert torch.equal(inputs[0, 1:], targets[0, :-1])


def test_user_entrypoint_loads_and_trains() -> None:
    name = "worker.zoo.examples.tiny_regression:build"
    config = TrainerConfig(model=name, plan=model_plan("none", 1, name), batch_size=32, lr=0.05)
    trainer = SPBTrainer(config, ThreadGroup(1).collectives(0))
    before = trainer.evaluate()
    trainer.run(30)
    assert trainer.workload.name == "tiny_regression" and trainer.evaluate() < before / 2


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("resnet1000", "unknown model 'resnet1000'"),
        ("no_such_package.mod:build", "cannot import module"),
        ("worker.zoo.examples.tiny_regression:missing", "has no function 'missing'"),
    ],
)
def test_bad_model_names_explain_themselves(name: str, message: str) -> None:
    with pytest.raises(UnknownModelError, match=message):
        load_workload(name)


def test_parameters_shared_between_blocks_are_rejected() -> None:
    shared = nn.Linear(4, 4)
    workload = Workload(
        name="tied",
        blocks=[shared, nn.Sequential(shared)],
        block_names=["a", "b"],
        loss=nn.functional.mse_loss,
        make_data=lambda: load_workload("worker.zoo.examples.tiny_regression:build").make_data(),
        metric="loss",
        input_shape=(4,),
    )
    with pytest.raises(InvalidSpecError, match="shared by blocks 1 and 2"):
        config = TrainerConfig(model="tied", plan=full_backprop(1, 2))
        SPBTrainer(config, ThreadGroup(1).collectives(0), workload=workload)


@pytest.mark.parametrize(
    ("source", "raised"),
    [("def build(:\n", "SyntaxError"), ("raise RuntimeError('no GPU driver')\n", "RuntimeError")],
)
def test_an_entrypoint_whose_module_raises_on_import_names_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, raised: str
) -> None:
    """A user's module that fails to import for any reason is a bad model (the job fails
    once with the entrypoint named), not a training error that would be retried."""
    package = tmp_path / f"userpkg_{raised.lower()}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "models.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"{package.name}.models:build"
    with pytest.raises(UnknownModelError, match=f"entrypoint '{name}'.*raised {raised}"):
        load_workload(name)


def test_a_builder_that_raises_is_the_models_error_not_a_flaky_worker() -> None:
    """Every rank and every retry would raise it again: the job fails at once."""
    with pytest.raises(ModelBuildError, match=r"needs_a_width' raised TypeError: .*'width'"):
        load_workload("tests.runtime.faulty:needs_a_width")
