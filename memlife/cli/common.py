"""Options and helpers shared by the CLI modules."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from memlife import progress as progress_hook

console = Console()
err_console = Console(stderr=True, soft_wrap=True)

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


def plain(value: object) -> Text:
    """A table cell of stored data (ids, owners, namespaces): never read as rich markup
    (an id "a[/]" raised MarkupError and hid the whole table) nor as terminal controls."""
    return Text(printable(value))


def fail(message: str, code: int = 2) -> typer.Exit:
    from rich.markup import escape

    err_console.print(f"[red]error:[/red] {escape(printable(message))}", highlight=False)
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
    """The resolved store URL, or a one-line refusal (exit 2).

    ``must_exist``: a SQLite file must already be there. Opening a mistyped path would
    create an empty database, and a read would then report success with 0 records.
    """
    from pathlib import Path
    from urllib.parse import urlparse

    from memlife.stores import resolve_store_url

    resolved = resolve_store_url(url)
    scheme = urlparse(resolved).scheme
    if scheme == "sqlite":
        path = resolved[len("sqlite:///") :] if resolved.startswith("sqlite:///") else ""
        if not path:
            raise fail(f"store {resolved!r}: expected sqlite:///path/to/file.db")
        if must_exist and not Path(path).is_file():
            raise fail(f"store {resolved}: no such file {path} (check --store or MEMLIFE_STORE)")
        return resolved
    if scheme == "agentcore":
        return resolved
    raise fail(
        f"store {resolved!r}: use sqlite:///path/to/file.db or agentcore://MEMORY_ID?region=.."
    )


def check_receipts(url: str | None) -> None:
    """A one-line refusal (exit 2) for a receipts URL no sink can take."""
    from memlife.audit import receipts_url_problem
    from memlife.settings import settings

    resolved = url or settings().receipts
    if not resolved:
        return  # the default under MEMLIFE_HOME
    problem = receipts_url_problem(resolved)
    if problem is not None:
        raise fail(f"receipts {resolved!r}: {problem}")


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
