"""Options and helpers shared by the CLI modules."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from memlife import progress as progress_hook

console = Console()
err_console = Console(stderr=True, soft_wrap=True)

StoreOpt = Annotated[
    str | None,
    typer.Option("--store", help="Store URL (sqlite:///path, agentcore://ID?region=..); env MEMLIFE_STORE."),
]
ReceiptsOpt = Annotated[
    str | None,
    typer.Option("--receipts", help="Receipts URL (file://path, s3://bucket/prefix); env MEMLIFE_RECEIPTS."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=1, default=str) + "\n")


def interactive(json_out: bool = False) -> bool:
    return not json_out and sys.stderr.isatty()


@contextmanager
def progress_bar(label: str, total: int | None, enabled: bool) -> Iterator[Any]:
    """A rich progress bar on a terminal; a no-op otherwise. Yields an advance(n) callable."""
    if not enabled:
        yield lambda n: None
        return
    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=err_console, transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task(label, total=total)
        advance = lambda n: bar.advance(task, n)
        progress_hook.set_hook(advance)
        try:
            yield advance
        finally:
            progress_hook.set_hook(None)


def fail(message: str, code: int = 2) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code)
