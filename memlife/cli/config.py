"""`memlife config show`: the resolved settings (memlife.settings), secrets masked."""

from __future__ import annotations

import os

import typer
from rich.table import Table

from memlife.cli.common import JsonOpt, console, plain, print_json
from memlife.settings import settings


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Show the resolved settings (environment variables; secrets masked).")

    @group.command("show")
    def show(json_out: JsonOpt = False) -> None:
        """Every setting with its resolved value, whether it came from the environment or is
        the default, and what it does.

        With --json a typed setting keeps its type (numbers, true/false; unset: null)."""
        rows = settings().shown()
        if json_out:
            print_json({var: value for var, value, _ in rows})
            return
        table = Table(title="memlife settings (README: Settings)")
        for col in ("variable", "value", "from", "meaning"):
            table.add_column(col)
        for var, value, meaning in rows:
            # where it came from: 120 set by a unit file and 120 by default read alike
            origin = "environment" if os.environ.get(var) else "default"  # empty: unset
            # not set: the default applies, which the meaning column states
            table.add_row(var, "(default)" if value is None else plain(value), origin, meaning)
        console.print(table)

    app.add_typer(group, name="config")
