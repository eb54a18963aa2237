"""`memlife import`, `memlife export`, `memlife demo`: records in and out of a store."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from memlife.cli.common import (
    JsonOpt,
    ReceiptsOpt,
    StoreOpt,
    check_store,
    err_console,
    fail,
    interactive,
    option_time,
    print_json,
    progress_bar,
    safe,
)
from memlife.importer import import_file
from memlife.stores import open_store
from memlife.stores.base import MemoryStore, chunked


def _holds_records(db: MemoryStore) -> bool:
    return next(iter(db.list_actors()), None) is not None


def register(app: typer.Typer) -> None:
    @app.command("import")
    def import_(
        file: Annotated[
            Path, typer.Argument(exists=True, dir_okay=False, help="JSONL, one record per line")
        ],
        update: Annotated[
            bool, typer.Option("--update", help="Overwrite existing ids (a receipted manual run)")
        ] = False,
        allow_held: Annotated[
            bool, typer.Option("--allow-held", help="With --update: also held records")
        ] = False,
        max_line_bytes: Annotated[int | None, typer.Option("--max-line-bytes", min=1)] = None,
        erasures: Annotated[
            Path | None,
            typer.Option(
                "--erasures",
                exists=True,
                dir_okay=False,
                help="The erasures `memlife export --erasures` wrote (tombstones, pending "
                "erasures), applied after the records",
            ),
        ] = None,
        access: Annotated[
            Path | None,
            typer.Option(
                "--access",
                exists=True,
                dir_okay=False,
                help="The access history `memlife export --access` wrote (ledger rows, no "
                "content), added to this side's ledger after the records (each read once)",
            ),
        ] = None,
        workers: Annotated[
            int | None,
            typer.Option(
                "--workers",
                min=0,
                help="Processes that parse and write in turn (a SQLite store only; 0: this "
                "process; default: 2 for a file of 16 MiB or more on 2+ cores, else 0)",
            ),
        ] = None,
        policy: Annotated[
            str | None, typer.Option("--policy", help="Policy (content size limit)")
        ] = None,
        store: StoreOpt = None,
        receipts: ReceiptsOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Import new records; bad lines, existing ids and duplicates are reported and skipped (exit 1)."""
        from memlife.policy import PolicyError

        if allow_held and not update:
            raise fail("--allow-held only makes sense with --update")
        from memlife.access_export import AccessImport, import_access, read_access_file
        from memlife.backends import open_ledger
        from memlife.erasure_export import apply_erasures, parse_erasures

        # a file that is no ledger rows is refused before any record is imported
        reads_in = read_access_file(access) if access is not None else None
        reads: AccessImport | None = None
        parsed = None
        if erasures is not None:  # checked whole before anything is imported
            with erasures.open("rb") as f:  # each line decoded on its own, named if bad
                parsed = parse_erasures(f)
        db = open_store(check_store(store, must_exist=False))
        carried: dict[str, Any] | None = None
        try:
            report = import_file(
                db,
                file,
                policy=policy,
                update=update,
                allow_held=allow_held,
                receipts=receipts,
                max_line_bytes=max_line_bytes,
                workers=workers,
            )
            if parsed is not None:
                carried = apply_erasures(db, *parsed, policy=policy, receipts=receipts)
            if reads_in is not None:
                reads = import_access(db, open_ledger(store=db), reads_in)
        except PolicyError as exc:
            raise fail(str(exc)) from None
        finally:
            db.close()
        if json_out:
            print_json(
                report.as_json()
                | ({"erasures": carried} if carried is not None else {})
                | ({"access": reads.as_dict()} if reads is not None else {})
            )
        else:
            if reads is not None:
                err_console.print(
                    f"access history: {reads.rows} reads added, {reads.already} already in the "
                    f"ledger, {reads.not_in_store} of records not in this store"
                )
                for why in reads.refused:
                    err_console.print(f"[red]refused[/red] access {safe(why)}", markup=True)
            if carried is not None:
                err_console.print(
                    f"erasures: {carried['tombstones']} tombstones, "
                    f"{len(carried.get('carried', []))} pending erasures carried"
                    + (
                        f", {len(carried['not_found'])} not found"
                        if carried.get("not_found")
                        else ""
                    )
                    + (  # an older backup held records erased since: erased again
                        f", {len(carried['erased_again'])} erased record(s) erased again"
                        if carried.get("erased_again")
                        else ""
                    )
                    + (
                        f", {len(carried['disputes']['carried'])} disputes carried"
                        if carried.get("disputes")
                        else ""
                    )
                )
            for e in report.invalid:
                err_console.print(f"[red]invalid[/red] {safe(e)}", markup=True)
            for c in report.conflicts:
                err_console.print(
                    f"[yellow]skipped[/yellow] line {c['line']}: record {safe(c['id'])}: "
                    f"{safe(c['code'])}",
                    markup=True,
                )
            for w in report.warnings:
                if w["code"] == "PREVIOUSLY_DELETED":  # no line: found in the store after
                    err_console.print(
                        f"[yellow]warning[/yellow] record {safe(w['id'])}: PREVIOUSLY_DELETED: "
                        f"run {safe(w['run_id'])} removed it with a receipt; imported again "
                        "(verify of that run will report it present)",
                        markup=True,
                    )
                    continue
                err_console.print(
                    f"[yellow]warning[/yellow] line {w['line']}: record {safe(w['id'])}: "
                    f"field '{safe(w['field'])}': {safe(w['code'])}",
                    markup=True,
                )
            err_console.print(
                f"imported {report.imported} records, {len(report.invalid)} invalid lines, "
                f"{len(report.conflicts)} skipped, {report.updated} updated, {report.unchanged} unchanged"
            )
            if report.run is not None:  # --update is a manual run: its receipt, as every writer's
                err_console.print(
                    f"run {report.run['run_id']}: {report.run['status']}; "
                    f"receipt: {report.run['receipt']}"
                )
        raise typer.Exit(0 if report.ok and not (reads and reads.refused) else 1)

    @app.command("export")
    def export(
        output: Annotated[
            Path | None,
            typer.Option("--output", "-o", dir_okay=False, help="File (default stdout)"),
        ] = None,
        erasures: Annotated[
            Path | None,
            typer.Option(
                "--erasures",
                dir_okay=False,
                help="Also write the store's erasures (tombstones, pending erasures; no "
                "content) here, for `memlife import --erasures`",
            ),
        ] = None,
        access: Annotated[
            Path | None,
            typer.Option(
                "--access",
                dir_okay=False,
                help="Also write the records' access history (ledger rows as Parquet; no "
                "content) here, for `memlife import --access`",
            ),
        ] = None,
        store: StoreOpt = None,
    ) -> None:
        """Export every record as JSONL (the import contract)."""
        from memlife.erasure_export import count_erasures, dump_erasures
        from memlife.export_files import Staged, export_targets_problem

        # "-" is stdout, as for most tools: `-o - | gzip` wrote a file named "-" and
        # nothing to the pipe (audit 52i); stdout holds the records, not the side files
        output = None if output is not None and str(output) == "-" else output
        for flag, side in (("--erasures", erasures), ("--access", access)):
            if side is not None and str(side) == "-":
                raise fail(f"{flag} -: stdout holds the records; give {flag} a file")
        db = open_store(check_store(store, must_exist=True))
        iter_all = getattr(db, "iter_all", None)
        if iter_all is None:
            db.close()
            raise fail("this store cannot export yet")
        if problem := export_targets_problem(db, output=output, erasures=erasures, access=access):
            db.close()
            raise fail(problem)
        staged = Staged()
        try:  # the open inside: a failed one leaves no staged file behind (audit 52m2)
            out = staged.open(output) if output else sys.stdout
            for record in iter_all():
                out.write(record.to_json() + "\n")
            if erasures is not None:
                staged.open(erasures).writelines(line + "\n" for line in dump_erasures(db))
            elif n := count_erasures(db):
                err_console.print(
                    f"[yellow]warning[/yellow] {n} erasures (tombstones, pending erasures, "
                    "disputes) are not in this export: a store imported from it would accept "
                    "erased text again and delete disputed records; pass --erasures FILE and "
                    "import with --erasures FILE",
                    markup=True,
                )
            if access is not None:
                from memlife.access_export import export_access
                from memlife.backends import open_ledger

                n_reads = export_access(db, open_ledger(store=db), staged.path(access))
            staged.commit()  # every file in its place at once, only once all are written
            if access is not None:
                err_console.print(f"access history: {n_reads} reads written to {access}")
        finally:
            staged.discard()
            db.close()

    @app.command("demo")
    def demo(
        records: Annotated[int, typer.Option("--records", "-n", min=1, max=10_000_000)] = 10_000,
        seed: Annotated[int, typer.Option("--seed")] = 7,
        anchor: Annotated[
            str | None, typer.Option("--anchor", help="ISO time the demo treats as now")
        ] = None,
        markers: Annotated[
            bool, typer.Option("--markers", help="Append a unique canary to each content")
        ] = False,
        force: Annotated[
            bool, typer.Option("--force", help="Write even into a store that holds records")
        ] = False,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Write realistic demo records (deterministic under --seed and --anchor)."""
        from memlife.demo import generate

        when: datetime | None = option_time(anchor, "--anchor")
        db = open_store(check_store(store, must_exist=False))
        if not force and _holds_records(db):
            db.close()
            raise fail(
                f"store {db.url} already holds records; demo data would mix with them "
                "(use another --store, or --force)"
            )
        from memlife.tombstones import insert_new

        written = kept = 0
        try:
            with progress_bar("demo records", records, interactive(json_out)) as advance:
                for batch in chunked(
                    generate(records, seed=seed, anchor=when, markers=markers), 5000
                ):
                    # insert-only, as an import: --force never overwrites a record (a hold, a
                    # reviewer's change) nor writes back erased content
                    result = insert_new(db, batch)
                    written += len(result.succeeded)
                    kept += len(result.failed)
                    advance(len(batch))
        finally:
            db.close()
        if json_out:
            print_json({"records": written, "kept": kept, "store": db.url})
        else:
            note = f"; {kept} already in the store or erased, left as they are" if kept else ""
            err_console.print(f"wrote {written} demo records to {db.url}{note}")
