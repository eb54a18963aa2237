"""`memlife ledger ingest-cloudtrail SRC`: AgentCore reads from CloudTrail into the access ledger."""

from __future__ import annotations

from typing import Annotated

import typer

from memlife.cli.common import JsonOpt, err_console, print_json


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
        json_out: JsonOpt = False,
    ) -> None:
        """Read GetMemoryRecord / RetrieveMemoryRecords data events into the ledger (idempotent per file)."""
        import logging

        from memlife.ledger import AccessLedger

        # the report below names each bad file and event; the ingest's warnings would repeat it
        logging.getLogger("memlife.cloudtrail").setLevel(logging.ERROR)
        led = AccessLedger(ledger)
        report = led.ingest_cloudtrail(source, force=force)
        led.flush()
        if json_out:
            print_json(report.as_dict())
        else:
            err_console.print(
                f"{report.files} files read ({report.already_ingested} already ingested), "
                f"{report.events} read events, {report.rows} ledger rows"
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
