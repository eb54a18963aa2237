"""`memlife import`, `memlife export`, `memlife demo`: records in and out of a store."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from memlife.cli.common import (
    JsonOpt,
    StoreOpt,
    err_console,
    fail,
    interactive,
    print_json,
    progress_bar,
)
from memlife.model import RecordError, parse_record_line, parse_time
from memlife.stores import open_store
from memlife.stores.base import chunked

BATCH = 1000


def import_records(path: Path, store_url: str | None) -> tuple[int, list[RecordError]]:
    """Validate every line; import the valid ones (upsert: re-import is idempotent)."""
    errors: list[RecordError] = []
    imported = 0
    store = open_store(store_url)
    try:
        batch = []
        with path.open("rb") as fh:  # decode per line: one bad byte must not sink the file
            for n, raw in enumerate(fh, start=1):
                try:
                    line = raw.decode("utf-8")
                    if not line.strip():
                        continue
                    batch.append(parse_record_line(line, n))
                except UnicodeDecodeError as exc:
                    errors.append(RecordError(None, "<encoding>", f"not UTF-8 at byte {exc.start}", n))
                except RecordError as exc:
                    errors.append(exc)
                if len(batch) >= BATCH:
                    imported += len(store.put_many(batch).succeeded)
                    batch = []
        if batch:
            imported += len(store.put_many(batch).succeeded)
    finally:
        store.close()
    return imported, errors


def register(app: typer.Typer) -> None:
    @app.command("import")
    def import_(
        file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="JSONL, one record per line")],
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Import records; each invalid line is reported and skipped (exit 1 if any)."""
        imported, errors = import_records(file, store)
        if json_out:
            print_json({"imported": imported, "invalid": [e.as_dict() for e in errors]})
        else:
            for e in errors:
                err_console.print(f"[red]invalid[/red] {e}")
            err_console.print(f"imported {imported} records, {len(errors)} invalid lines")
        raise typer.Exit(1 if errors else 0)

    @app.command("export")
    def export(
        output: Annotated[Path | None, typer.Option("--output", "-o", help="File (default stdout)")] = None,
        store: StoreOpt = None,
    ) -> None:
        """Export every record as JSONL (the import contract)."""
        db = open_store(store)
        iter_all = getattr(db, "iter_all", None)
        if iter_all is None:
            raise fail("this store cannot export yet")
        out = output.open("w", encoding="utf-8") if output else sys.stdout
        try:
            for record in iter_all():
                out.write(record.to_json() + "\n")
        finally:
            if output:
                out.close()
            db.close()

    @app.command("demo")
    def demo(
        records: Annotated[int, typer.Option("--records", "-n", min=1, max=10_000_000)] = 10_000,
        seed: Annotated[int, typer.Option("--seed")] = 7,
        anchor: Annotated[str | None, typer.Option("--anchor", help="ISO time the demo treats as now")] = None,
        markers: Annotated[bool, typer.Option("--markers", help="Append a unique canary to each content")] = False,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Write realistic demo records (deterministic under --seed and --anchor)."""
        from memlife.demo import generate

        when: datetime | None = parse_time(anchor) if anchor else None
        db = open_store(store)
        written = 0
        try:
            with progress_bar("demo records", records, interactive(json_out)) as advance:
                for batch in chunked(generate(records, seed=seed, anchor=when, markers=markers), 5000):
                    written += len(db.put_many(batch).succeeded)
                    advance(len(batch))
        finally:
            db.close()
        if json_out:
            print_json({"records": written, "store": db.url})
        else:
            err_console.print(f"wrote {written} demo records to {db.url}")
