"""`memlife ops failed | resolve`: terminal failures wait for an operator, never a replay."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from memlife.cli.common import (
    JsonOpt,
    StoreOpt,
    check_store,
    console,
    fail,
    print_id_table,
    print_json,
)
from memlife.evidence_key import keyed
from memlife.journal import JournalStateError, open_journal
from memlife.model import utcnow
from memlife.stores import open_store


class Decision(StrEnum):
    requeue = "requeue"  # the cause is fixed: due again now, through its applier's checks
    dismiss = "dismiss"  # leave it as it is; the decision stays on record


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        help="Operations in the journal: terminal failures and their resolution.",
        no_args_is_help=True,
    )

    @group.command("failed")
    def failed(
        all_: Annotated[bool, typer.Option("--all", help="Include resolved ones")] = False,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Terminal failures (never retried by themselves) and groups sent to review."""
        db = open_store(check_store(store, must_exist=True))
        try:
            journal = open_journal(db)
            ops = journal.terminal_failures(include_resolved=all_)
            review: list[dict[str, object]] = [dict(g) for g in journal.groups_in_review()]
            if review:  # each group also as the night's receipt names it (keyed: audit 53a)
                secret = journal.run_secret()
                for g in review:
                    g["receipt_group_key"] = keyed(str(g["group_key"]), secret)
        finally:
            db.close()
        rows = [
            {
                "operation_id": o.operation_id,
                "run_id": o.run_id,
                "action": o.kind.value,
                "record_id": o.record_id,
                "actor_id": o.actor_id,
                "namespace": o.namespace,
                "code": o.last_error,
                "attempts": o.attempts,
                "failed_at": o.updated_at.isoformat() if o.updated_at else None,
                "resolution": o.resolution,
            }
            for o in ops
        ]
        if json_out:
            print_json({"operations": rows, "groups_in_review": review})
            return
        columns = ("operation", "run", "action", "record", "code", "failed at", "resolution")
        cells = [(r["operation_id"], r["run_id"], r["action"], r["record_id"], r["code"] or "",
                  str(r["failed_at"] or "")[:19], r["resolution"] or "") for r in rows]  # fmt: skip
        print_id_table(f"{len(rows)} terminal failures", columns, cells,
                       ids={"operation", "run", "record"})  # fmt: skip
        if review:
            console.print(
                f"{len(review)} consolidation groups in review (refused answers); --json lists them"
            )

    @group.command("resolve")
    def resolve(
        operation_id: str,
        decision: Annotated[Decision, typer.Option("--decision", help="requeue or dismiss")],
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Decide on a terminal failure by hand: requeue it (it runs again, with its checks) or dismiss it."""
        db = open_store(check_store(store, must_exist=True))
        try:
            journal = open_journal(db)
            now = utcnow()
            try:
                op = journal.resolve(
                    operation_id,
                    {Decision.requeue: "requeued", Decision.dismiss: "dismissed"}[decision],
                    at=now,
                    retry_at=now if decision is Decision.requeue else None,
                )
            except JournalStateError as exc:
                raise fail(str(exc), 1) from None
        finally:
            db.close()
        result = {
            "operation_id": op.operation_id,
            "resolution": op.resolution,
            "next_retry_at": op.next_retry_at.isoformat() if op.next_retry_at else None,
        }
        if json_out:
            print_json(result)
        else:
            console.print(f"{op.operation_id}: {op.resolution}")

    app.add_typer(group, name="ops")
