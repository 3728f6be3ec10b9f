"""/api/v1/tokens: admins issue, list and revoke tokens (shown once; only hashes are stored)."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from api.deps import Admin, StateDep, reject_unknown_query
from api.errors import ApiError
from api.json_body import JsonRoute
from api.schemas.common import COMMON_ERRORS, ErrorBody
from api.schemas.tokens import TokenCreate, TokenIssued, TokenList, TokenPublic
from api.timefmt import iso
from api.tokens import (
    LastAdminTokenError,
    TokenNotFoundError,
    TokenRecord,
    create_token,
    list_tokens,
    revoke_token,
)

log = logging.getLogger("jigsaw.tokens")

router = APIRouter(
    route_class=JsonRoute,
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
def create_api_token(body: TokenCreate, admin: Admin, state: StateDep) -> TokenIssued:
    """Issue a token for ``user`` with ``scopes``. Save it: it is not shown again."""
    issued = create_token(state.engine, name=body.name, user=body.user, scopes=body.scopes)
    log.info(
        "token %d (%r, user %r) created by %r", issued.id, issued.name, issued.user, admin.user
    )
    return TokenIssued(
        token=issued.token,
        id=issued.id,
        name=issued.name,
        user=issued.user,
        scopes=list(issued.scopes),
    )


@router.get("/tokens", response_model=TokenList, operation_id="list_tokens")
def list_api_tokens(
    _admin: Admin,
    state: StateDep,
    include_revoked: Annotated[bool, Query(description="also list revoked tokens")] = False,
) -> TokenList:
    """Tokens, oldest first: id, name, user, scopes and times. Never the tokens themselves."""
    records = list_tokens(state.engine, include_revoked=include_revoked)
    return TokenList(items=[token_public(record) for record in records])


@router.post(
    "/tokens/{token_id}/revoke",
    response_model=TokenPublic,
    operation_id="revoke_token",
    responses={
        404: {"model": ErrorBody, "description": "no token has this id"},
        409: {"model": ErrorBody, "description": "the last active admin token"},
    },
)
def revoke_api_token(
    token_id: Annotated[int, Path(ge=1, le=2**31 - 1)], admin: Admin, state: StateDep
) -> TokenPublic:
    """Revoke a token. This server refuses it at once, others within a few seconds (their
    lookup cache). Revoking a revoked token changes nothing. The last admin token stays."""
    try:
        record = revoke_token(state.engine, token_id)
    except TokenNotFoundError as error:
        raise ApiError(404, str(error)) from None
    except LastAdminTokenError as error:
        raise ApiError(409, str(error)) from None
    state.principals.forget(record.token_hash)
    log.info(
        "token %d (%r, user %r) revoked by %r", record.id, record.name, record.user, admin.user
    )
    return token_public(record)


def token_public(record: TokenRecord) -> TokenPublic:
    return TokenPublic(
        id=record.id,
        name=record.name,
        user=record.user,
        scopes=list(record.scopes),
        created_at=iso(record.created_at) or "",
        revoked_at=iso(record.revoked_at),
    )
