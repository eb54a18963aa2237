"""The `memlife` command line (typer + rich). Each command group lives in its own module.

Modules are imported only when their command runs (or its own --help is asked for), so
`memlife --help` and `memlife --version` load typer and nothing of memlife's heavy parts.
``COMMANDS`` lists every top-level command with its module and one-line help;
tests/e2e/test_cli_basics.py fails when it drifts from what the modules register.

Exit codes (README "Exit codes"): 0 done; 1 the command failed or found problems;
2 bad usage or input (unknown option, bad URL, missing store file, invalid policy);
3 finished, but not fully (a run that is not ``success``, refusals in a manual run);
4 another lifecycle run holds the store's lease ("another run holds the lock: RUN_ID since ..");
130 / 143 stopped by Ctrl-C (SIGINT) / SIGTERM, after its cleanup ("stopped by SIGTERM ...").
Errors are one line on stderr; MEMLIFE_DEBUG=1 shows the traceback instead.
"""

from __future__ import annotations

import signal
from importlib import import_module
from typing import Annotated, Any, get_args

import typer
from typer import _click
from typer.core import TyperCommand, TyperGroup, TyperOption
from typer.exceptions import TyperException  # click's exceptions (typer vendors click)

from memlife import __version__

Command = _click.Command  # typer vendors click: the type get_command returns

# name -> (module that registers it, one-line help shown by `memlife --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("memlife.cli.run", "Run the nightly lifecycle job (use --dry-run to only propose)."),
    "import": (
        "memlife.cli.data",
        "Import new records; bad lines, existing ids and duplicates are reported and skipped (exit 1).",
    ),
    "export": ("memlife.cli.data", "Export every record as JSONL (the import contract)."),
    "demo": (
        "memlife.cli.data",
        "Write realistic demo records (deterministic under --seed and --anchor).",
    ),
    "remember": (
        "memlife.cli.online",
        "Save a fact for an actor; an exact or near duplicate refreshes the existing one.",
    ),
    "recall": (
        "memlife.cli.online",
        "The actor's most relevant active memories, best first (each hit is ledgered).",
    ),
    "warm": (
        "memlife.cli.online",
        "Embed what active memories lack (vectors, token codes): after an upgrade or a model change.",
    ),
    "chat": (
        "memlife.cli.online",
        "Chat with the example agent: one user message per stdin line (ANTHROPIC_BASE_URL honoured).",
    ),
    "erase": (
        "memlife.cli.erase",
        "Erase records and everything derived from them (legal holds defer; see docs/evaluation.md).",
    ),
    "receipts": ("memlife.cli.receipts", "Review run receipts (file:// or s3://)."),
    "eval": (
        "memlife.cli.evaluation",
        "Evaluation sets for the regression gate (docs/evaluation.md).",
    ),
    "quarantine": (
        "memlife.cli.quarantine",
        "Records the regression gate quarantined: list, restore, purge.",
    ),
    "hold": ("memlife.cli.erase", "Legal holds."),
    "config": ("memlife.cli.config", "Show the resolved settings (environment variables; secrets masked)."),
    "review": ("memlife.cli.review", "Review items: list them, show one with its text, resolve them (journaled, receipted)."),
    "ledger": ("memlife.cli.ledger", "The access ledger (recall telemetry, CloudTrail data events)."),
    "ops": ("memlife.cli.ops", "Operations in the journal: terminal failures and their resolution."),
}  # fmt: skip

BAD_INPUT = 2
FAILED = 1
LEASE_HELD = 4  # another lifecycle run holds the store's lease (memlife/lease.py)


def load_command(name: str) -> Command:
    """Import the module behind ``name`` and build its click command."""
    module = import_module(COMMANDS[name][0])
    # plain help, as the root's: typer's rich help printed a `<bool>` metavar after every
    # flag (`--dry-run <bool>`, `--help <bool>`: no value is taken) and cut long help
    # texts with "…" inside its boxes
    holder = typer.Typer(add_completion=False, rich_markup_mode=None)
    module.register(holder)
    group = typer.main.get_command(holder)
    cmd = group.commands.get(name) if isinstance(group, TyperGroup) else group
    if cmd is None:
        raise RuntimeError(f"{COMMANDS[name][0]} registers no command {name!r}")
    _name_repeated_values(cmd)
    return cmd


def _name_repeated_values(cmd: Command) -> None:
    """A repeatable option takes one value each time it is given: its help shows that
    value's type (`--id <str>`), not typer's `<list[str]>`, which reads as one list."""
    for sub in [cmd, *getattr(cmd, "commands", {}).values()]:
        for param in sub.params:
            if isinstance(param, TyperOption) and param.multiple and param.metavar is None:
                element = get_args(param.type_descriptor.annotation)
                if len(element) == 1 and isinstance(element[0], type):
                    param.metavar = f"<{element[0].__name__}>"


def one_line_error(exc: BaseException) -> tuple[str, int]:
    """The message and exit code for an exception a command did not handle."""
    from memlife.errors import MemlifeError  # stdlib-only module: --help stays fast

    text = " ".join(str(exc).split()) or type(exc).__name__
    if getattr(exc, "exit_code", None) == LEASE_HELD:  # memlife.lease.LeaseHeld: its line says it
        return text, LEASE_HELD
    if isinstance(exc, MemlifeError):  # its class says whether it is bad input or a failure
        return (
            (text, exc.exit_code)
            if exc.exit_code == BAD_INPUT
            else (f"{type(exc).__name__}: {text}", exc.exit_code)
        )
    if isinstance(exc, (ValueError, LookupError, FileNotFoundError, NotADirectoryError)):
        return text, BAD_INPUT
    return f"{type(exc).__name__}: {text}", FAILED


class LazyGroup(TyperGroup):
    """Lists commands from ``COMMANDS``; imports a command's module only to run it."""

    _resolving = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMANDS:
            return None
        if self._resolving:
            return load_command(cmd_name)
        # for the command list in --help: a stand-in with the one-line help
        return TyperCommand(cmd_name, help=COMMANDS[cmd_name][1])

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        self._resolving = True
        try:
            return super().resolve_command(ctx, args)
        finally:
            self._resolving = False

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (TyperException, typer.Exit, typer.Abort):
            raise
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Stopped): one line, 128 + signal
            from memlife.cli.common import err_console

            signum = exc.signum if isinstance(exc, Stopped) else signal.SIGINT
            err_console.print(f"error: stopped by {signal.Signals(signum).name} before it "
                              "finished; run it again to finish", markup=False, highlight=False)  # fmt: skip
            raise typer.Exit(128 + signum) from None
        except Exception as exc:
            from memlife.settings import settings

            try:
                debug = settings().debug
            except Exception:  # noqa: BLE001 - the settings themselves are the error: one line
                debug = False
            if debug:
                raise
            from rich.markup import escape

            from memlife.cli.common import err_console

            message, code = one_line_error(exc)
            err_console.print(f"[red]error:[/red] {escape(message)}", markup=True)
            raise typer.Exit(code) from None


app = typer.Typer(
    name="memlife",
    cls=LazyGroup,
    help="Keep an AI agent's memory true over time.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,  # plain help: the rich formatter alone costs ~0.7 s to import
    pretty_exceptions_enable=False,
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"memlife {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_show_version
        ),
    ] = False,
) -> None:
    """Keep an AI agent's memory true over time."""


class Stopped(KeyboardInterrupt):
    """SIGTERM, raised where the process stands as Ctrl-C's KeyboardInterrupt is."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, frame: object) -> None:
    raise Stopped(signum)


def main() -> None:
    # SIGTERM (systemd stop, a Kubernetes eviction, `timeout`) stops a command as Ctrl-C
    # does, its cleanup run: by default it died outright, its lease left held and a night's
    # planning children orphaned, calling the model for every part left (audit 52j)
    signal.signal(signal.SIGTERM, _stop)
    app()
