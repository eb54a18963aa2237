"""`memlife erase --actor A [--subject S | --id ID...]` and `memlife hold release --id ID`."""

from __future__ import annotations

from typing import Annotated

import typer

from memlife.cli.common import JsonOpt, ReceiptsOpt, StoreOpt, err_console, fail, print_json
from memlife.model import RetentionClass
from memlife.stores import open_store

PolicyOpt = Annotated[str, typer.Option("--policy")]


def _report(result: dict, json_out: bool) -> None:
    if json_out:
        print_json(result)
        return
    for key in ("erased", "derived", "deferred", "released"):
        if result.get(key):
            err_console.print(f"{key}: {', '.join(result[key])}")
    for sub in result.get("erasures", []):
        err_console.print(
            f"erased after release: {', '.join(sub['erased']) or '-'} (run {sub['run_id']})"
        )
    err_console.print(f"run {result['run_id']}: {result['status']}; receipt: {result['receipt']}")


def register(app: typer.Typer) -> None:
    @app.command("erase")
    def erase(
        actor: Annotated[str | None, typer.Option("--actor", help="Whose records")] = None,
        subject: Annotated[
            str | None, typer.Option("--subject", help="Erase this subject's records")
        ] = None,
        ids: Annotated[
            list[str] | None, typer.Option("--id", help="Record id (repeatable)")
        ] = None,
        pending: Annotated[
            bool,
            typer.Option(
                "--pending/--no-pending", help="Also apply deferred erasures whose hold is gone"
            ),
        ] = True,
        policy: PolicyOpt = "policies/default.yaml",
        store: StoreOpt = None,
        receipts: ReceiptsOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Erase records and everything derived from them (legal holds defer; see docs/evaluation.md)."""
        from memlife.erase import EraseError
        from memlife.erase import erase as do_erase

        if subject is None and not ids and not pending:
            raise fail("name --subject or --id (or --pending to apply deferred erasures)")
        if (subject or ids) and not actor:
            raise fail("--actor is required with --subject/--id")
        db = open_store(store)
        try:
            result = do_erase(db, actor, subject=subject, ids=ids or (), pending=pending,
                              policy=policy, receipts=receipts)  # fmt: skip
        except EraseError as exc:
            raise fail(str(exc)) from None
        finally:
            db.close()
        _report(result, json_out)
        if result["status"] != "success":
            raise typer.Exit(3)

    hold = typer.Typer(help="Legal holds.", no_args_is_help=True)

    @hold.command("release")
    def release(
        ids: Annotated[list[str], typer.Option("--id", help="Record id (repeatable)")],
        retention_class: Annotated[
            RetentionClass, typer.Option("--retention-class", help="Class after release")
        ] = RetentionClass.standard,
        policy: PolicyOpt = "policies/default.yaml",
        store: StoreOpt = None,
        receipts: ReceiptsOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Lift a legal hold; a deferred erasure of the record is applied at once."""
        from memlife.erase import EraseError, release_hold

        db = open_store(store)
        try:
            result = release_hold(db, ids, retention_class=retention_class, policy=policy,
                                  receipts=receipts)  # fmt: skip
        except EraseError as exc:
            raise fail(str(exc)) from None
        finally:
            db.close()
        _report(result, json_out)
        if result.get("not_found"):
            raise typer.Exit(3)

    app.add_typer(hold, name="hold")
