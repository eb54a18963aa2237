"""The `memlife` command line (typer + rich). Each command group lives in its own module."""

from __future__ import annotations

import typer

from memlife.cli import data, erase, evaluation, online, quarantine, receipts, run

app = typer.Typer(
    name="memlife",
    help="Keep an AI agent's memory true over time.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for module in (run, data, receipts, online, evaluation, quarantine, erase):
    module.register(app)


def main() -> None:
    app()
