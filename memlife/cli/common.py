"""Options and helpers shared by the CLI modules."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from memlife import progress as progress_hook


class StoredDataConsole(Console):
    """A console for output that carries stored data (ids, namespaces, paths, settings):
    markup is off unless a call asks for it (``markup=True``, its values through
    :func:`safe`), and every string printed has its control characters written as escapes
    (line breaks kept). With rich's default, a stored id ``q-[/]`` raised MarkupError after
    the command's work was done (exit 1 for a run that succeeded), ``q-[bold]b`` printed as
    another id, and an ESC in an id reached the terminal."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(markup=False, highlight=False, **kwargs)

    def print(self, *objects: Any, **kwargs: Any) -> None:  # noqa: A003 - rich's name
        super().print(*(_lines(o) if isinstance(o, str) else o for o in objects), **kwargs)


console = StoredDataConsole()
err_console = StoredDataConsole(stderr=True, soft_wrap=True)

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store", help="Store URL (sqlite:///path, agentcore://ID?region=..); env MEMLIFE_STORE."
    ),
]
ReceiptsOpt = Annotated[
    str | None,
    typer.Option(
        "--receipts", help="Receipts URL (file://path, s3://bucket/prefix); env MEMLIFE_RECEIPTS."
    ),
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
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)
        advance = lambda n: bar.advance(task, n)
        progress_hook.set_hook(advance)
        progress_hook.set_phase_hook(
            lambda name, n: bar.update(task, description=name, total=n, completed=0)
        )
        try:
            yield advance
        finally:
            progress_hook.set_hook(None)
            progress_hook.set_phase_hook(None)


# C0 and C1 controls (ESC starts a terminal escape; a newline draws a row that is not one),
# and the bidirectional overrides that show text in another order than it is stored
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(value: object) -> str:
    """``value`` as text a terminal shows as it is stored: controls written as escapes."""
    return _UNSAFE.sub(lambda m: ascii(m.group())[1:-1], str(value))


def _lines(text: str) -> str:
    """``printable`` line by line: the line breaks of a message kept."""
    return "\n".join(printable(line) for line in text.split("\n"))


def safe(value: object) -> str:
    """A stored value inside a ``markup=True`` message: controls escaped, markup escaped."""
    from rich.markup import escape

    return escape(printable(value))


def plain(value: object) -> Text:
    """A table cell of stored data (ids, owners, namespaces): never read as rich markup
    (an id "a[/]" raised MarkupError and hid the whole table) nor as terminal controls."""
    return Text(printable(value))


def print_id_table(
    title: str, columns: Sequence[str], rows: Iterable[Sequence[object]], ids: Collection[str]
) -> None:
    """A table whose id columns (``ids``) are never cut: they keep their whole width and
    the other columns wrap. When the console is too narrow for the ids plus a few
    characters of every other column (``review list`` at 80 columns showed ``rv-5…``), one
    block per row instead: ``column  value`` lines, empty ones left out, wrapped by the
    terminal and not by rich, so an id stays whole and can be copied into the next command.
    Cells are stored data: never markup, controls escaped (``plain``)."""
    from rich.cells import cell_len
    from rich.table import Table

    cells = [[printable(v) for v in row] for row in rows]
    widest = [max([cell_len(c)] + [cell_len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    need = sum(w if c in ids else min(w, _NARROWEST) for c, w in zip(columns, widest, strict=True))
    if need + 3 * len(columns) + 1 <= console.width:  # each column: 2 padding, 1 border
        table = Table(title=Text(printable(title)))
        for col, width in zip(columns, widest, strict=True):
            if col in ids:
                table.add_column(col, no_wrap=True, min_width=width)
            else:
                table.add_column(col, overflow="fold")
        for row in cells:
            table.add_row(*map(Text, row))
        console.print(table)
        return
    label = max(map(cell_len, columns))
    console.print(Text(printable(title), style="italic"), soft_wrap=True)
    for row in cells:
        console.print()
        for col, cell in zip(columns, row, strict=True):
            if cell:  # an empty cell (no pair, no owner) is left out
                console.print(Text(f"{col:<{label}}  {cell}"), soft_wrap=True)


_NARROWEST = 8  # characters a wrapped column keeps in a table of whole ids


def fail(message: str, code: int = 2) -> typer.Exit:
    from rich.markup import escape

    err_console.print(f"[red]error:[/red] {escape(printable(message))}", markup=True)
    return typer.Exit(code)


# -- validation before anything starts -----------------------------------------------------


def prefect_api_url() -> str | None:
    """The Prefect API this shell is configured for (env, else the active profile), or None.

    Read without importing Prefect (seconds): $PREFECT_API_URL, else PREFECT_API_URL of the
    active profile in $PREFECT_HOME/profiles.toml (default ~/.prefect).
    """
    import os
    import tomllib
    from pathlib import Path

    if os.environ.get("PREFECT_API_URL"):
        return os.environ["PREFECT_API_URL"]
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    profiles = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml")
    try:
        data = tomllib.loads(profiles.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    active = os.environ.get("PREFECT_PROFILE") or data.get("active")
    profile = data.get("profiles", {}).get(active, {}) if active else {}
    url = profile.get("PREFECT_API_URL") if isinstance(profile, dict) else None
    return url or None


def check_store(url: str | None, *, must_exist: bool = True) -> str:
    """The resolved store URL, or a one-line refusal (exit 2) naming where the value came
    from (--store, else MEMLIFE_STORE, else the default under MEMLIFE_HOME).

    ``must_exist``: a SQLite file must already be there. Opening a mistyped path would
    create an empty database, and a read would then report success with 0 records.
    """
    from pathlib import Path

    from memlife.settings import settings, store_url_problem

    if url:
        source = "--store"
        problem = store_url_problem(url)
        if problem:
            raise fail(f"--store {url!r}: {problem}")
        resolved = url
    else:  # MEMLIFE_STORE was checked as the settings were read (a bad one names itself)
        source = "MEMLIFE_STORE" if settings().store else "the default under MEMLIFE_HOME"
        resolved = settings().store_url
    if resolved.startswith("sqlite:///"):
        path = resolved[len("sqlite:///") :]
        if Path(path).is_dir():
            raise fail(f"store {resolved}: {path} is a folder, not a SQLite file (from {source})")
        if must_exist and not Path(path).is_file():
            raise fail(f"store {resolved}: no such file {path} (from {source})")
    return resolved


def check_receipts(url: str | None) -> None:
    """A one-line refusal (exit 2) for a receipts URL no sink can take, naming where it came
    from (--receipts, else MEMLIFE_RECEIPTS; the default under MEMLIFE_HOME is fine)."""
    from memlife.audit import receipts_url_problem
    from memlife.settings import settings, without_password

    source, resolved = ("--receipts", url) if url else ("MEMLIFE_RECEIPTS", settings().receipts)
    if not resolved:
        return
    problem = receipts_url_problem(resolved)
    if problem is not None:  # an endpoint_url's password goes to no log (as parse_state_url)
        raise fail(f"{source} {without_password(resolved)!r}: {problem}")


def option_time(value: str | None, option: str) -> datetime | None:
    """An ISO-8601 time with a zone given as ``option``, or a one-line refusal naming it."""
    from memlife.model import parse_time

    if not value:
        return None
    try:
        return parse_time(value)
    except ValueError as exc:
        why = ("has no time zone" if "timezone" in str(exc)
               else "is past the calendar once in UTC" if "out of range" in str(exc)
               else "is no ISO-8601 time")  # fmt: skip
        raise fail(f"{option} {value!r} {why} (e.g. 2026-11-29T02:15:00Z)") from None


def check_utf8(values: Iterable[str], name: str) -> None:
    """A one-line refusal (exit 2) for an argument that is not UTF-8 (a latin-1 byte from
    the shell arrives as a lone surrogate), before any run starts or any file is read."""
    for value in values:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise fail(f"{name} {value!r} is not valid UTF-8") from None


def check_policy(path: str | None) -> None:
    """A one-line refusal (exit 2) for a policy file that is missing or invalid."""
    from memlife.policy import PolicyError, load_policy

    try:
        load_policy(path)
    except PolicyError as exc:
        raise fail(" ".join(str(exc).split())) from None


YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do it; without --yes only a preview.")]


def preview(
    verb: str, ids: list[str], json_out: bool, detail: dict[str, str] | None = None
) -> None:
    """What a destructive command would do; nothing changed (exit 0)."""
    if json_out:
        print_json(
            {"preview": True, "action": verb, "count": len(ids), "ids": ids, "detail": detail or {}}
        )
        return
    for rid in ids:
        why = f"  ({detail[rid]})" if detail and rid in detail else ""
        err_console.print(f"would {verb} {rid}{why}", highlight=False)
    err_console.print(
        f"{verb}: {len(ids)} record(s) would change; nothing done. Re-run with --yes."
    )
