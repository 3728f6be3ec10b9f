"""Verbs on the cluster and the service: cluster, queue, serve, scheduler, token create, list
and revoke."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cli.cluster_views import cluster_view, models_table
from cli.context import make_client
from cli.errors import CliError, UsageError
from cli.output import OutputFormat, OutputOption, emit, note
from cli.views import queue_table, token_table


def cluster(output: OutputOption = OutputFormat.table) -> None:
    """Nodes and GPUs, with the workers packed on each GPU and their stop depths."""
    with make_client() as client:
        data = client.cluster()
    emit(data, output, lambda: cluster_view(data))


def queue(output: OutputOption = OutputFormat.table) -> None:
    """Waiting jobs in the order the policy takes them (priority first under las and jigsaw),
    with their estimated start and why each waits."""
    with make_client() as client:
        data = client.queue()
    emit(data, output, lambda: queue_table(data.get("items", []), data.get("order")))


def models(
    workers: Annotated[
        int, typer.Option(min=1, max=1024, help="Predict the plan types for this many workers.")
    ] = 4,
    batch_size: Annotated[
        int, typer.Option(min=1, help="Per-worker batch to predict them for.")
    ] = 32,
    output: OutputOption = OutputFormat.table,
) -> None:
    """The model zoo: blocks K, parameters, which plan types fit the server's per-worker
    memory limit, and where each plan type's η comes from."""
    with make_client() as client:
        data = client.models(workers, batch_size)
    emit(data, output, lambda: models_table(data))


def serve(
    host: Annotated[
        str, typer.Option(envvar="JIGSAW_HOST", help="Interface to bind.")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(envvar="JIGSAW_PORT", min=1, max=65535, help="TCP port.")
    ] = 8765,
) -> None:
    """Run the control plane (API, dashboard and scheduler loop) in the foreground."""
    from api import server  # the control plane, loaded only by the verbs that run it

    server.serve(host, port)


def scheduler() -> None:
    """Run only the scheduler loop (for a separate scheduler process next to API replicas)."""
    from api import server

    server.run_scheduler()


token_app = typer.Typer(
    help="Manage API tokens (needs an admin token).", no_args_is_help=True, rich_markup_mode=None
)


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Option(help="A label for the token, e.g. the laptop it is for.")],
    user: Annotated[str, typer.Option(help="The user the token acts as.")],
    scope: Annotated[
        list[str] | None,
        typer.Option(help="admin, user or worker; repeat for several. Default: user."),
    ] = None,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline",
            help="Write it straight into the database named by JIGSAW_DATABASE_URL (bootstrap "
            "on the server machine, when no admin token exists yet).",
        ),
    ] = False,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Create a token. It is printed once; the server keeps only its hash."""
    scopes = scope or ["user"]
    if offline:
        created = _create_token_offline(name, user, scopes)
    else:
        with make_client() as client:
            created = client.create_token(name, user, scopes)
    emit(created, output, lambda: created["token"])
    note(
        f"token {created.get('id')} ({created.get('name')!r}) for user {created.get('user')!r} "
        f"(scopes: {', '.join(created.get('scopes', []))}) created; it is shown only once. "
        "Give it to its user as JIGSAW_TOKEN or in ~/.config/jigsaw/config.toml."
    )


@token_app.command("list")
def token_list(
    all_tokens: Annotated[bool, typer.Option("--all", help="Also list revoked tokens.")] = False,
    output: OutputOption = OutputFormat.table,
) -> None:
    """Tokens by id: name, user, scopes, when created and revoked. Never the secrets."""
    with make_client() as client:
        items = client.list_tokens(include_revoked=all_tokens)
    emit({"items": items}, output, lambda: token_table(items))


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[int, typer.Argument(min=1, help="The id `token list` shows.")],
    output: OutputOption = OutputFormat.table,
) -> None:
    """Revoke a token. The server refuses it at once; other API replicas within seconds."""
    with make_client() as client:
        revoked = client.revoke_token(token_id)
    emit(revoked, output, lambda: None)
    note(
        f"token {revoked.get('id')} ({revoked.get('name')!r}, user {revoked.get('user')!r}) "
        "is revoked."
    )


def _create_token_offline(name: str, user: str, scopes: list[str]) -> dict[str, Any]:
    from sqlalchemy.exc import SQLAlchemyError  # only the offline path needs the database

    from api import tokens

    try:
        issued = tokens.create_token_offline(name=name, user=user, scopes=scopes)
    except tokens.InvalidScopeError as error:
        raise UsageError(str(error)) from error
    except SQLAlchemyError as error:
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise CliError(f"cannot write the token to the database: {first_line}") from error
    return {
        "token": issued.token,
        "id": issued.id,
        "name": issued.name,
        "user": issued.user,
        "scopes": list(issued.scopes),
    }
