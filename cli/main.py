"""The ``jigsaw-cli`` entry point: assembles the verbs and maps every failure to an exit code."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from cli import job_commands, ops_commands, submit_command
from cli.click_errors import NoArgsIsHelpError, UsageError
from cli.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, CliError
from cli.output import error_line

app = typer.Typer(
    name="jigsaw-cli",
    help=(
        "Submit and follow SPB training jobs on a JigSaw cluster. The server URL and token come "
        "from JIGSAW_URL / JIGSAW_TOKEN or ~/.config/jigsaw/config.toml, never from flags."
    ),
    no_args_is_help=True,
    add_completion=False,
    # Plain help, as Click and most CLIs print it: flags without a type tag (`--watch`, not
    # `--watch <bool>`), no boxes to break when piped.
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

app.command("submit")(submit_command.submit)
app.command("list")(job_commands.list_jobs)
app.command("status")(job_commands.status)
app.command("describe")(job_commands.describe)
app.command("logs")(job_commands.logs)
app.command("cancel")(job_commands.cancel)
app.command("cluster")(ops_commands.cluster)
app.command("queue")(ops_commands.queue)
app.command("models")(ops_commands.models)
app.command("serve")(ops_commands.serve)
app.command("scheduler")(ops_commands.scheduler)
app.add_typer(ops_commands.token_app, name="token")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"jigsaw-cli {version('jigsaw-scheduler')}")
        except PackageNotFoundError:
            typer.echo("jigsaw-cli (not installed as a package)")
        raise typer.Exit()


@app.callback()
def _root(
    _show_version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Submit and follow SPB training jobs on a JigSaw cluster."""


def _load_simulate() -> Callable[..., Any] | None:
    """The simulator's command lives in cli/simulate.py, owned by the simulator."""
    if importlib.util.find_spec("cli.simulate") is None:
        return None
    try:
        module = importlib.import_module("cli.simulate")
    except ImportError as error:
        reason = str(error)

        def simulate_unavailable() -> None:
            """The simulator (unavailable in this environment)."""
            raise CliError(f"simulate is unavailable here: {reason}")

        return simulate_unavailable
    simulate: Callable[..., Any] = module.simulate
    return simulate


_simulate = _load_simulate()
if _simulate is not None:
    app.command("simulate")(_simulate)


def main() -> None:
    """Console-script entry. User mistakes print one line; they never show a traceback."""
    try:
        code = app(prog_name="jigsaw-cli", standalone_mode=False)
    except NoArgsIsHelpError as error:
        typer.echo(error.ctx.get_help() if error.ctx is not None else str(error))
        sys.exit(EXIT_USAGE)
    except UsageError as error:
        # One line, as every other mistake: Typer's boxed usage text would take six.
        command = error.ctx.command_path if error.ctx is not None else "jigsaw-cli"
        error_line(f"{error.format_message()} (see {command} --help)")
        sys.exit(EXIT_USAGE)
    except typer.Abort:
        sys.exit(EXIT_INTERRUPTED)
    except CliError as error:
        error_line(str(error))
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        # `jigsaw-cli list | head` closed stdout early; that is not an error worth a traceback.
        sys.stderr.close()
        sys.exit(EXIT_FAILURE)
    sys.exit(code if isinstance(code, int) else 0)
