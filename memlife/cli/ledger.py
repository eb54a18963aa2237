"""`memlife ledger ingest-cloudtrail SRC`: AgentCore reads from CloudTrail into the access ledger."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from memlife.cli.common import JsonOpt, StoreOpt, check_store, err_console, print_json


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="The access ledger (recall telemetry, CloudTrail data events).",
                        no_args_is_help=True)  # fmt: skip

    @group.command("ingest-cloudtrail")
    def ingest(
        source: Annotated[
            str, typer.Argument(help="Folder of CloudTrail log files, or s3://bucket/prefix")
        ],
        ledger: Annotated[
            str | None,
            typer.Option("--ledger", help="Ledger folder (default $MEMLIFE_HOME/ledger)"),
        ] = None,
        force: Annotated[
            bool, typer.Option("--force", help="Read files ingested before again")
        ] = False,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Read GetMemoryRecord / RetrieveMemoryRecords data events into the ledger (idempotent per file).

        Reads of records the store's erasures removed are not written (the store: --store,
        else MEMLIFE_STORE, else the embedded one when its file exists)."""
        import logging

        from memlife.ledger import AccessLedger

        # the report below names each bad file and event; the ingest's warnings would repeat it
        logging.getLogger("memlife.cloudtrail").setLevel(logging.ERROR)
        db = _erasures_of(store)
        try:
            led = AccessLedger(ledger)
            report = led.ingest_cloudtrail(source, force=force, store=db)
            led.flush()
        finally:
            if db is not None:
                db.close()
        if json_out:
            print_json(report.as_dict())
        else:
            err_console.print(
                f"{report.files} files read ({report.already_ingested} already ingested), "
                f"{report.events} read events, {report.rows} ledger rows"
                + (f", {report.erased_rows} of erased records left out" if report.erased_rows
                   else "")
                + (f", {report.already_written_rows} written before" if report.already_written_rows
                   else "")
                + (f", skipped {dict(report.skipped)}" if report.skipped else "")
                + (f", {len(report.bad_files)} bad files skipped" if report.bad_files else ""),
                markup=False, highlight=False,
            )  # fmt: skip
            for line in report.bad_files:
                err_console.print(f"bad file (not marked; read again next time): {line}",
                                  markup=False, highlight=False)  # fmt: skip
            shown = report.bad_events
            for line in shown:
                err_console.print(f"bad event (skipped): {line}", markup=False, highlight=False)
            more = report.skipped.get("bad_event", 0) - len(shown)
            if more > 0:
                err_console.print(f"... and {more} more bad events", markup=False)

    app.add_typer(group, name="ledger")


def _erasures_of(url: str | None) -> Any:
    """The store whose erasures an ingest honours: ``--store`` (it must open), else
    $MEMLIFE_STORE or the embedded store; a SQLite file that is not there has no erasures
    (its tombstones live in it): None."""
    from pathlib import Path

    from memlife.stores import open_store, resolve_store_url

    if url:
        return open_store(check_store(url, must_exist=True))
    resolved = resolve_store_url(None)
    if resolved.startswith("sqlite:///") and not Path(resolved[len("sqlite:///") :]).is_file():
        return None
    return open_store(check_store(resolved, must_exist=True))
