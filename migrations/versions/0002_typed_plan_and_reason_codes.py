"""Typed plans and reason codes: ``jobs.plan`` holds a tagged plan object instead of a bare
list of depths, and every event gets a ``Type/Reason`` code.

``jobs.plan`` was ``[d0, d1, ...]`` (``[]`` before a start) and becomes
``{"kind": "spb", "depths": [...], "num_blocks": K}`` (JSON ``null`` before a start). K of a
stored row is the shipped profile's block count for catalog models; for models without a
profile it is the smallest K the depths allow (``max(depths) + 1``), which is exact for full
backprop, the only plan such jobs were started with that the worker could run unchanged.
The retry and preemption facts that lived in ``jobs.extra`` keep living there: the codec maps
them to the job's typed fields.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen at this revision: block counts of the models shipped with a profile then.
PROFILE_BLOCKS = {
    "mlp": 4,
    "digits_cnn": 4,
    "resnet18_32": 4,
    "resnet18_224": 4,
    "resnet50_32": 4,
    "resnet50_224": 4,
    "vgg16_32": 5,
    "vgg16_224": 5,
    "gpt_small": 4,
}


def _plan_object(raw: Any, model: str) -> Any:
    if isinstance(raw, str):
        raw = json.loads(raw)
    if not isinstance(raw, list):
        return raw
    if not raw:
        return None
    depths = [int(d) for d in raw]
    blocks = PROFILE_BLOCKS.get(model, max(depths) + 1)
    return {"kind": "spb", "depths": depths, "num_blocks": max(blocks, max(depths) + 1)}


def _flat_plan(raw: Any) -> Any:
    if isinstance(raw, str):
        raw = json.loads(raw)
    if isinstance(raw, dict):
        return list(raw.get("depths", []))
    return [] if raw is None else raw


def _rewrite(convert: Any) -> None:
    bind = op.get_bind()
    jobs = sa.table(
        "jobs", sa.column("id", sa.String), sa.column("spec", sa.JSON), sa.column("plan", sa.JSON)
    )
    rows = list(bind.execute(sa.select(jobs.c.id, jobs.c.spec, jobs.c.plan)))
    for job_id, spec, plan in rows:
        spec = json.loads(spec) if isinstance(spec, str) else spec
        bind.execute(
            jobs.update().where(jobs.c.id == job_id).values(plan=convert(plan, spec["model"]))
        )


def upgrade() -> None:
    with op.batch_alter_table("job_events") as batch:
        batch.add_column(sa.Column("code", sa.String(64), nullable=False, server_default=""))
    _rewrite(_plan_object)


def downgrade() -> None:
    _rewrite(lambda plan, _model: _flat_plan(plan))
    with op.batch_alter_table("job_events") as batch:
        batch.drop_column("code")
