"""The model catalog, the parsed plan request, the plan's one stored form, the one policy
builder, and what a first lease teaches the control plane about an entrypoint model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jigsaw.model.domain import Job, JobSpec, transition
from jigsaw.model.errors import InvalidPlanError, InvalidSpecError
from jigsaw.model.hardware import preset
from jigsaw.model.lease_outcome import LeaseOutcome
from jigsaw.model.lifecycle import JobState
from jigsaw.model.plan import (
    PlanRequest,
    RequestKind,
    SPBPlan,
    full_backprop,
    plan_from_json,
    plan_to_json,
)
from jigsaw.model.profiles import ZOO_MODELS
from jigsaw.model.reasons import ReasonCode
from jigsaw.oracle import Oracle
from jigsaw.planning.catalog import ModelCatalog, ModelKind, is_entrypoint
from jigsaw.planning.planner import Planner
from jigsaw.policies.base import policy_names
from jigsaw.policies.builder import build_policy
from jigsaw.policies.quota import QuotaPolicy, Quotas
from jigsaw.scheduling.lease_facts import LeaseFacts, learned_model_facts

CATALOG = ModelCatalog()


def job(model: str, spb: str = "staircase", workers: int = 4, **changes: object) -> Job:
    spec = JobSpec(name="j", model=model, workers=workers, iterations=10, spb=spb)
    return Job(id="j-1", spec=spec, submitted_at=0.0, **changes)  # type: ignore[arg-type]


def test_catalog_tells_zoo_trace_and_entrypoint_models_apart() -> None:
    assert CATALOG.lookup("digits_cnn").kind is ModelKind.ZOO
    assert CATALOG.lookup("digits_cnn").num_blocks == 4
    assert CATALOG.lookup("vgg16_32").num_blocks == 5
    assert CATALOG.lookup("cifar10").kind is ModelKind.TRACE
    entry = CATALOG.lookup("my_pkg.models:build")
    assert entry.kind is ModelKind.ENTRYPOINT and entry.num_blocks is None


@pytest.mark.parametrize("name", ["no_such_model", "../../etc/passwd", "pkg.mod:", "a:b:c", ""])
def test_catalog_refuses_unknown_names_naming_the_model_field(name: str) -> None:
    assert CATALOG.find(name) is None
    with pytest.raises(InvalidSpecError) as caught:
        CATALOG.lookup(name)
    assert caught.value.field == "model"


def test_entrypoint_syntax_takes_identifier_parts_only() -> None:
    assert is_entrypoint("pkg.sub_mod:build2")
    assert not is_entrypoint("pkg-x.mod:build")
    assert not is_entrypoint("pkg.mod:build()")


def test_plan_request_is_parsed_once_and_spelled_canonically() -> None:
    spec = JobSpec(name="a", model="mlp", workers=3, iterations=5, spb=" Uniform:2 ")
    assert spec.spb == "uniform:2"
    assert spec.plan_request == PlanRequest(RequestKind.UNIFORM, depth=2)
    listed = JobSpec.from_mapping(
        {"name": "b", "model": "mlp", "workers": 3, "iterations": 5, "spb": [0, 1, 1]}
    )
    assert listed.spb == "0,1,1" and listed.plan_request.depths == (0, 1, 1)
    assert "plan_request" not in listed.to_dict()


def test_plan_request_checks_depths_against_a_known_block_count() -> None:
    PlanRequest.parse("uniform:3").check_blocks(4)
    with pytest.raises(InvalidPlanError, match="outside the model"):
        PlanRequest.parse("uniform:4").check_blocks(4)
    with pytest.raises(InvalidPlanError, match="outside the model"):
        PlanRequest.parse("0,9").check_blocks(4)


def test_a_plan_has_one_stored_form_that_round_trips() -> None:
    plan = SPBPlan((0, 1, 2, 3), 4)
    assert plan_to_json(plan) == {"kind": "spb", "depths": [0, 1, 2, 3], "num_blocks": 4}
    assert plan_from_json(plan_to_json(plan)) == plan
    with pytest.raises(InvalidPlanError, match="unknown plan kind"):
        plan_from_json({"kind": "warp", "depths": [0], "num_blocks": 1})


def test_plans_are_equal_only_with_the_same_block_count() -> None:
    assert SPBPlan((0, 0), 4) != SPBPlan((0, 0), 5)
    assert SPBPlan((0, 1), 4) == SPBPlan((0, 1), 4)
    assert hash(SPBPlan((0, 1), 4)) == hash(SPBPlan((0, 1), 4))


def test_a_plan_never_equals_a_bare_tuple() -> None:
    """Equality stays an equivalence: were ``SPBPlan((0, 1), 4) == (0, 1)`` and
    ``(0, 1) == SPBPlan((0, 1), 5)``, two unequal plans would both equal one tuple."""
    assert SPBPlan((0, 1), 4) != (0, 1)
    assert (0, 1) != SPBPlan((0, 1), 4)
    assert SPBPlan((0, 1), 4).depths == (0, 1)


def test_gang_policies_resolve_against_the_catalog_or_start_full_backprop_without_k() -> None:
    planner = Planner(catalog=CATALOG)
    assert planner.start_plan(job("digits_cnn")) == SPBPlan((0, 1, 2, 3), 4)
    unknown = planner.start_plan(job("my_pkg.models:build"))
    assert unknown.is_full_backprop and unknown.num_blocks == 1
    assert full_backprop(4, 1).rebased(6) == SPBPlan((0, 0, 0, 0), 6)
    with pytest.raises(InvalidPlanError):
        SPBPlan((0, 1), 4).rebased(6)
    # a reported K wins over the catalog's silence
    learned = job("my_pkg.models:build", model_blocks=6)
    assert planner.start_plan(learned) == SPBPlan((0, 1, 3, 4), 6)


def test_the_first_lease_report_teaches_k_and_the_plan_the_workers_resolved() -> None:
    started = job("my_pkg.models:build", plan=full_backprop(4, 1))
    resolved = SPBPlan((0, 1, 3, 4), 6)
    facts = learned_model_facts(started, LeaseOutcome(plan=resolved, num_blocks=6))
    assert facts == LeaseFacts(model_blocks=6, plan=resolved)
    taught = facts.applied_to(started)
    assert (taught.model_blocks, taught.plan, taught.block_noise) == (6, resolved, ())
    # a report without a plan: K alone is learned, the job keeps its plan
    assert learned_model_facts(started, LeaseOutcome(num_blocks=6)) == LeaseFacts(model_blocks=6)
    assert LeaseFacts(model_blocks=6).applied_to(started).plan == started.plan
    known = job("digits_cnn", plan=SPBPlan((0, 1, 2, 3), 4))
    same = LeaseOutcome(plan=SPBPlan((0, 1, 2, 3), 4), num_blocks=4)
    assert learned_model_facts(known, same) == LeaseFacts()
    assert learned_model_facts(started, None) == LeaseFacts()


def test_one_builder_serves_every_registered_policy_and_wraps_quotas() -> None:
    oracle = Oracle(preset("v100"))
    for name in policy_names():
        policy = build_policy(name, oracle)
        assert policy.name == name
        assert isinstance(policy.periodic, bool) and isinstance(policy.serves_arrival_prefix, bool)
    wrapped = build_policy("las", oracle, {"min_run_s": 60}, quotas=Quotas({"q": 2}, {}))
    assert isinstance(wrapped, QuotaPolicy) and wrapped.periodic
    with pytest.raises(InvalidSpecError, match="has no option"):
        build_policy("fifo", oracle, {"oracle": 1})


def test_events_carry_a_reason_code() -> None:
    start = job("digits_cnn")
    admitted, event = transition(start, JobState.ADMITTED, reason="r", at=1.0, actor="t")
    assert event.code == ReasonCode.ADMITTED
    _, preempted = transition(
        admitted,
        JobState.PREEMPTED,
        reason="r",
        at=2.0,
        actor="t",
        code=ReasonCode.PREEMPTED_BY,
        preempted_by="j-2",
    )
    assert preempted.code == "Preempted/OutrankedBy"


def test_docs_list_every_zoo_model_a_submission_may_name() -> None:
    """docs/API.md ("Checks a submission passes") names the zoo models the catalog takes."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "API.md").read_text()
    check = text.split("### Checks a submission passes")[1].split("4. **`spb` fits")[0]
    listed = check.split("(`jigsaw/planning/catalog.py`:")[1].split(")")[0]
    assert set(re.findall(r"`(\w+)`", listed)) == set(ZOO_MODELS)


def test_docs_list_every_reason_code_and_no_other() -> None:
    """docs/API.md ("Job events") lists the codes programs may match on: all of them."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "API.md").read_text()
    listed = text.split("(`jigsaw/model/reasons.py`):")[1].split("Match on codes")[0]
    documented = set(re.findall(r"`([A-Z][a-z]+/[A-Za-z]+)`", listed))
    assert documented == {str(code) for code in ReasonCode}


def test_a_stored_spec_is_rebuilt_equal_without_a_second_check() -> None:
    spec = JobSpec(name="a", model="mlp", workers=3, iterations=5, spb="uniform:2", priority=3)
    assert JobSpec.from_stored(spec.to_dict()) == spec
    assert JobSpec.from_stored(spec.to_dict()).plan_request == spec.plan_request
    # fields added later fall back to their defaults on old rows
    old_row = {k: v for k, v in spec.to_dict().items() if k != "queue"}
    assert JobSpec.from_stored(old_row).queue == "default"
