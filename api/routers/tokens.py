"""/api/v1/tokens: admins issue tokens (shown once; only hashes are stored)."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from api.deps import Admin, StateDep, reject_unknown_query
from api.schemas.common import COMMON_ERRORS
from api.schemas.tokens import TokenCreate, TokenIssued
from api.tokens import create_token

router = APIRouter(
    prefix="/api/v1",
    tags=["tokens"],
    responses=COMMON_ERRORS,
    dependencies=[Depends(reject_unknown_query)],
)


@router.post(
    "/tokens",
    status_code=201,
    response_model=TokenIssued,
    operation_id="create_token",
)
def create_api_token(body: TokenCreate, _admin: Admin, state: StateDep) -> TokenIssued:
    """Issue a token for ``user`` with ``scopes``. Save it: it is not shown again."""
    issued = create_token(state.engine, name=body.name, user=body.user, scopes=body.scopes)
    return TokenIssued(
        token=issued.token, name=issued.name, user=issued.user, scopes=list(issued.scopes)
    )
