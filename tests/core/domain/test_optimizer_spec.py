"""A job's ``optimizer`` in the core: the spec's default and refusals, and the planner's answer
for AdamW (data parallel only, with AdamW's two moments in the per-worker memory)."""

from __future__ import annotations

from typing import Any

import pytest

from jigsaw.model.domain import JobSpec
from jigsaw.model.errors import InvalidSpecError
from jigsaw.oracle.plan_predictions import predict_data_parallel
from jigsaw.oracle.profile_catalog import ProfileCatalog
from jigsaw.planning.planner import Planner

MLP: dict[str, Any] = {"name": "o", "model": "mlp", "workers": 2, "iterations": 10}


def test_sgd_is_the_default_and_a_stored_spec_without_the_field_reads_as_sgd() -> None:
    assert JobSpec(**MLP).optimizer == "sgd"
    assert JobSpec(**MLP, optimizer="adamw").to_dict()["optimizer"] == "adamw"
    assert JobSpec.from_stored(MLP).optimizer == "sgd"
    assert JobSpec.from_mapping({**MLP, "optimizer": "adamw"}).optimizer == "adamw"


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"optimizer": "adam"}, "one of sgd, adamw, got 'adam'"),
        ({"optimizer": "adamw", "parallelism": "pipeline"}, "the pipeline engine trains with SGD"),
        ({"optimizer": "adamw", "parallelism": "hybrid"}, "the hybrid engine trains with SGD"),
    ],
)
def test_bad_optimizers_are_refused_naming_the_field(changes: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidSpecError, match=words) as refused:
        JobSpec(**MLP, **changes)
    assert refused.value.field == "optimizer"


def test_a_mistyped_optimizer_in_a_job_file_is_named() -> None:
    with pytest.raises(InvalidSpecError, match="must be str") as refused:
        JobSpec.from_mapping({**MLP, "optimizer": 2})
    assert refused.value.field == "optimizer"


def test_adamw_holds_one_more_copy_of_the_parameters_than_sgd() -> None:
    profile = ProfileCatalog().get("mlp")
    hardware = Planner().hardware
    sgd = predict_data_parallel(profile, hardware, 2, 32)
    adamw = predict_data_parallel(profile, hardware, 2, 32, "adamw")
    assert adamw.max_model_bytes - sgd.max_model_bytes == profile.param_bytes
    assert adamw.per_worker_memory[0].optimizer == 2 * profile.param_bytes


def test_adamw_under_auto_is_planned_data_parallel_with_its_own_memory() -> None:
    planner = Planner()
    sgd = planner.plan_choice(JobSpec(**MLP))
    adamw = planner.plan_choice(JobSpec(**MLP, optimizer="adamw"))
    assert sgd is not None and adamw is not None
    assert {a.kind for a in sgd.alternatives} == {"data", "pipeline", "hybrid"}
    assert [a.kind for a in adamw.alternatives] == ["data"]
    assert adamw.chosen.prediction.max_model_bytes > sgd.alternatives[0].prediction.max_model_bytes
    assert planner.typed_plan(JobSpec(**MLP, optimizer="adamw")) is None


def test_a_limit_that_holds_sgd_but_not_adamws_moments_refuses_adamw() -> None:
    need = {
        (optimizer, batch): Planner()
        .plan_choice(JobSpec(**MLP, optimizer=optimizer, batch_size=batch))
        .chosen.prediction.max_model_bytes  # type: ignore[union-attr]
        for optimizer in ("sgd", "adamw")
        for batch in (1, 32)
    }
    # Between AdamW at batch 1 and at batch 32: the batch is what to change.
    planner = Planner(memory_limit_bytes=(need["adamw", 1] + need["adamw", 32]) // 2)
    planner.check(JobSpec(**MLP, batch_size=32))
    with pytest.raises(InvalidSpecError, match="at batch_size 32 with optimizer adamw") as big:
        planner.check(JobSpec(**MLP, batch_size=32, optimizer="adamw"))
    assert big.value.field == "batch_size"
    planner.check(JobSpec(**MLP, batch_size=1, optimizer="adamw"))
    # Below AdamW at batch 1 but above SGD at 32: no batch fits AdamW; the optimizer is named.
    assert need["sgd", 32] < need["adamw", 1]
    planner = Planner(memory_limit_bytes=(need["sgd", 32] + need["adamw", 1]) // 2)
    planner.check(JobSpec(**MLP, batch_size=32))
    with pytest.raises(InvalidSpecError, match=r"at any batch\. Use optimizer sgd") as never:
        planner.check(JobSpec(**MLP, batch_size=1, optimizer="adamw"))
    assert never.value.field == "optimizer"
