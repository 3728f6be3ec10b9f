"""The OpenAPI schema publishes the core's plan grammar, not a copy of it."""

from __future__ import annotations

from api.schemas.jobs import JobCreate
from jigsaw.model.plan import PLAN_TEXT_PATTERN


def test_the_job_schema_publishes_the_plan_text_pattern() -> None:
    spb = JobCreate.model_json_schema()["properties"]["spb"]
    patterns = [branch["pattern"] for branch in spb["anyOf"] if "pattern" in branch]
    assert patterns == [PLAN_TEXT_PATTERN]
