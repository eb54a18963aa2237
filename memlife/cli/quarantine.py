"""`memlife quarantine list | restore ID... | purge --older-than DAYS`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from memlife.cli.common import (
    JsonOpt,
    ReceiptsOpt,
    StoreOpt,
    YesOpt,
    check_policy,
    check_receipts,
    check_store,
    check_utf8,
    err_console,
    fail,
    option_time,
    preview,
    print_id_table,
    print_json,
    safe,
)
from memlife.model import utcnow
from memlife.stores import open_store

PolicyOpt = Annotated[str, typer.Option("--policy")]
# at most 100 years, as every span of days in a policy (memlife.policy.MAX_DAYS): the
# grace becomes ``now - timedelta(days=...)``, which 1e308 overflowed (a bare OverflowError)
MAX_DAYS = 36_500


def _report(result: dict[str, Any], json_out: bool, verb: str) -> None:
    if json_out:
        print_json(result)
    else:
        for o in result["operations"]:
            err_console.print(
                f"{verb} {o['record_id']}: {o['outcome'] or o['state']}"
                + (f" ({o['error']})" if o["error"] else "")
            )
        for rid in result.get("not_found", []):
            err_console.print(f"[yellow]not found[/yellow] {safe(rid)}", markup=True)
        err_console.print(
            f"run {result['run_id']}: {result['status']}; receipt: {result['receipt']}"
        )
    if result["status"] != "success" or result.get("not_found"):
        raise typer.Exit(3)


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        help="Records the regression gate quarantined: list, restore, purge.", no_args_is_help=True
    )

    @group.command("list")
    def list_(
        actor: Annotated[str | None, typer.Option("--actor")] = None,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Quarantined records (ids, scope, when, why; no content)."""
        from memlife.quarantine import list_quarantined

        db = open_store(check_store(store, must_exist=True))
        try:
            rows = list_quarantined(db, actor)
        finally:
            db.close()
        if json_out:
            print_json(rows)
            return
        print_id_table(
            f"{len(rows)} quarantined records",
            ("id", "actor", "namespace", "type", "since", "reasons"),
            [
                (
                    r["id"],
                    r["actor_id"],
                    r["namespace"],
                    r["memory_type"],
                    r["quarantined_at"] or "",
                    ", ".join(r["reasons"]),
                )
                for r in rows
            ],  # fmt: skip
            {"id"},
        )

    @group.command("restore")
    def restore(
        ids: Annotated[list[str], typer.Argument(help="Record ids to restore")],
        policy: PolicyOpt = "policies/default.yaml",
        store: StoreOpt = None,
        receipts: ReceiptsOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Bring records back exactly as they were before quarantine (journaled, receipted)."""
        from memlife.quarantine import restore as do_restore

        check_utf8(ids, "record id")
        check_policy(policy)
        check_receipts(receipts)
        db = open_store(check_store(store, must_exist=True))  # a typo is no new, empty store
        try:
            result = do_restore(db, ids, policy=policy, receipts=receipts)
        finally:
            db.close()
        _report(result, json_out, "restore")

    @group.command("purge")
    def purge(
        older_than: Annotated[
            float,
            typer.Option("--older-than", min=0, max=MAX_DAYS, help="Days in quarantine (0..36500)"),
        ],
        now: Annotated[
            str | None,
            typer.Option(
                "--now", help="Reference time, ISO-8601 (at most 48 h ahead of the clock)"
            ),
        ] = None,
        policy: PolicyOpt = "policies/default.yaml",
        store: StoreOpt = None,
        receipts: ReceiptsOpt = None,
        yes: YesOpt = False,
        json_out: JsonOpt = False,
    ) -> None:
        """Delete records quarantined at least DAYS ago (legal holds excepted); --yes to do it."""
        from memlife.quarantine import purge as do_purge
        from memlife.quarantine import purge_candidates
        from memlife.run_types import MAX_AHEAD  # the guard of `memlife run --now`

        at = option_time(now, "--now")
        # a reference time far ahead makes every quarantined record look old enough at once;
        # a time in the past is harmless (less is due). A preview changes nothing.
        if yes and at is not None and at > utcnow() + MAX_AHEAD:
            raise fail(
                f"--now {at.isoformat()} is more than 48 h ahead of the clock: the quarantine "
                "grace is real time; purge with a reference time near now"
            )
        db = open_store(check_store(store, must_exist=True))
        if not yes:  # a preview: what would go, nothing changed
            try:
                due = purge_candidates(db, older_than, at)
            finally:
                db.close()
            preview("purge", [q["id"] for q in due], json_out)
            return
        try:
            result = do_purge(
                db,
                older_than,
                policy=policy,
                receipts=receipts,
                now=at,
            )
        finally:
            db.close()
        _report(result, json_out, "purge")

    app.add_typer(group, name="quarantine")
