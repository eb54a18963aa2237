"""`memlife erase --actor A [--subject S | --id ID...]`, `memlife hold place|release`."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any

import typer

from memlife.cli.common import (
    JsonOpt,
    ReceiptsOpt,
    StoreOpt,
    YesOpt,
    check_store,
    err_console,
    fail,
    preview,
    print_json,
)
from memlife.model import RetentionClass
from memlife.stores import open_store
from memlife.stores.base import MemoryStore

PolicyOpt = Annotated[str, typer.Option("--policy")]


class AfterRelease(StrEnum):
    """The classes a released record may take: RetentionClass but legal_hold (a release to
    legal_hold releases nothing, and --help offered it)."""

    standard = RetentionClass.standard.value
    sensitive = RetentionClass.sensitive.value


def _report(result: dict[str, Any], json_out: bool) -> None:
    if json_out:
        print_json(result)
        return
    for key in ("erased", "derived", "rebuilt", "reactivated", "deferred", "still_deferred",
                "released", "not_held", "not_found"):  # fmt: skip
        if result.get(key):
            err_console.print(f"{key.replace('_', ' ')}: {', '.join(result[key])}")
    for sub in result.get("erasures", []):
        rebuilt = f", rebuilt {', '.join(sub['rebuilt'])}" if sub.get("rebuilt") else ""
        err_console.print(
            f"erased after release: {', '.join(sub['erased']) or '-'}{rebuilt} "
            f"(run {sub['run_id']})"
        )
    err_console.print(f"run {result['run_id']}: {result['status']}; receipt: {result['receipt']}")


def _inferred_hint(db: MemoryStore, actor: str, subject: str) -> str:
    """Erase by subject reads only subjects a person gave; where memlife inferred this one
    (what `hold place --subject` also counts), say which records, so that an operator
    erasing a person's data is not told "nothing" while their records stay."""
    from memlife.holds import subject_ids

    inferred = subject_ids(db, actor, subject, given=False)
    if not inferred:
        return ""
    shown = ", ".join(sorted(inferred)[:10]) + (", ..." if len(inferred) > 10 else "")
    return (
        f" (no record of actor {actor} was given subject {subject!r}; {len(inferred)} "
        f"carry it as an inferred subject, which erase reads only with --inferred: {shown}; "
        "check them (the preview, without --yes), then erase with --inferred or --id)"
    )


def _erase_preview(
    db: MemoryStore, actor: str | None, subject: str | None, ids: Sequence[str], pending: bool
) -> dict[str, str]:
    """record id -> why (and whether a hold defers it), as erase would select them."""
    from memlife.apply.appliers.base import is_held as held
    from memlife.erase import pending_erasures, plan_erasure

    out: dict[str, str] = {}
    if actor and (subject or ids):
        plan = plan_erasure(db, actor, subject=subject, ids=ids)
        for r in plan.targets:
            out[r.id] = plan.why[r.id] + ("; held: deferred" if held(r) else "")
        # not erased, changed: rebuilt from kept sources, or back to active
        out |= {r.id: "REBUILT_FROM_KEPT_SOURCES" for r in plan.rebuild}
        out |= {r.id: "REACTIVATED_SOURCE" for r in plan.reactivate}
    if pending:
        for p in pending_erasures(db, actor):
            released = db.get(p["record_id"])
            if released is not None and released.id not in out and not held(released):
                out[released.id] = "HOLD_RELEASED"
        out |= {rid: "UNFINISHED_ERASURE" for rid in _unfinished_erasures(db, actor)}
    return out


def _unfinished_erasures(db: MemoryStore, actor: str | None) -> list[str]:
    """Records whose erasure an earlier attempt left unfinished (killed after the delete,
    before its receipt; a receipt outage): ``erase --pending`` (the default) completes them,
    so a rerun of the same request is never "nothing matched"."""
    from memlife.journal import OpKind, open_journal
    from memlife.model import utcnow

    journal = open_journal(db)
    return [o.record_id for page in journal.due_pages(utcnow()) for o in page
            if o.kind is OpKind.erase and (actor is None or o.actor_id == actor)]  # fmt: skip


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
        inferred: Annotated[
            bool,
            typer.Option(
                "--inferred",
                help="With --subject: also the records memlife inferred the subject for "
                "(what hold place --subject holds); check the preview first",
            ),
        ] = False,
        policy: PolicyOpt = "policies/default.yaml",
        store: StoreOpt = None,
        receipts: ReceiptsOpt = None,
        yes: YesOpt = False,
        json_out: JsonOpt = False,
    ) -> None:
        """Erase records and everything derived from them (legal holds defer; see docs/evaluation.md)."""
        from memlife.erase import EraseError
        from memlife.erase import erase as do_erase

        if subject is None and not ids and not pending:
            raise fail("name --subject or --id (or --pending to apply deferred erasures)")
        if (subject or ids) and not actor:
            raise fail("--actor is required with --subject/--id")
        if inferred and not subject:
            raise fail("--inferred reads a subject: name it with --subject")
        db = open_store(check_store(store, must_exist=True))
        guessed: list[str] = []
        if inferred and subject and actor:  # named as ids: the run erases what was previewed
            from memlife.holds import subject_ids

            guessed = subject_ids(db, actor, subject, given=False)
            ids = [*(ids or ()), *guessed]
        try:  # what would be erased or deferred: a preview, and the check before a run
            ids_why = _erase_preview(db, actor, subject, ids or (), pending)
            for rid in guessed:  # an inferred key is a guess: the preview says which
                if rid in ids_why:
                    ids_why[rid] += "; inferred subject"
        except EraseError as exc:
            db.close()
            raise fail(str(exc)) from None
        if not ids_why and (subject or ids):  # no run, no receipt for nothing (README: exit 1)
            hint = _inferred_hint(db, actor, subject) if subject and actor else ""
            db.close()
            if json_out:
                preview("erase", [], json_out, {})
            raise fail(f"nothing matched: no record would be erased or deferred{hint}", 1)
        if not yes:  # a preview: nothing changed
            db.close()
            preview("erase", list(ids_why), json_out, ids_why)
            return
        try:
            result = do_erase(
                db,
                actor,
                subject=subject,
                ids=ids or (),
                pending=pending,
                policy=policy,
                receipts=receipts,
            )
        except EraseError as exc:
            raise fail(str(exc)) from None
        finally:
            db.close()
        resumed = sorted(i for i, why in ids_why.items() if why == "UNFINISHED_ERASURE")
        if resumed and not json_out:  # the records are gone already: their receipts were not
            err_console.print(f"finished earlier erasures: {', '.join(resumed)}")
        _report(result, json_out)
        if result["status"] != "success":
            raise typer.Exit(3)
        done = ("erased", "derived", "deferred", "released", "erasures")
        if (subject or ids) and not resumed and not any(result.get(k) for k in done):
            raise fail("nothing matched: no record was erased or deferred", 1)

    hold = typer.Typer(help="Legal holds.", no_args_is_help=True)

    @hold.command("place")
    def place(
        ids: Annotated[
            list[str] | None, typer.Option("--id", help="Record id (repeatable)")
        ] = None,
        actor: Annotated[
            str | None, typer.Option("--actor", help="Whose records (with --subject)")
        ] = None,
        subject: Annotated[
            str | None, typer.Option("--subject", help="Hold the actor's records on this subject")
        ] = None,
        policy: PolicyOpt = "policies/default.yaml",
        store: StoreOpt = None,
        receipts: ReceiptsOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Place a legal hold (journaled, receipted): never deleted, superseded or rewritten."""
        from memlife.holds import HoldError, place_hold

        db = open_store(check_store(store, must_exist=True))
        try:
            result = place_hold(db, ids=ids or (), actor=actor, subject=subject, policy=policy,
                                receipts=receipts)  # fmt: skip
        except HoldError as exc:
            raise fail(str(exc), exc.exit_code) from None
        finally:
            db.close()
        if json_out:
            print_json(result)
        else:
            placed = [i for i in result["held"] if i not in set(result.get("already_held", ()))]
            err_console.print(f"held: {', '.join(placed) or '-'}")
            for key in ("already_held", "not_found"):  # named: exit 3 says only "not fully"
                if result.get(key):
                    err_console.print(f"{key.replace('_', ' ')}: {', '.join(result[key])}")
            err_console.print(
                f"run {result['run_id']}: {result['status']}; receipt: {result['receipt']}"
            )
        if result["status"] != "success" or result.get("not_found"):
            raise typer.Exit(3)

    @hold.command("release")
    def release(
        ids: Annotated[list[str], typer.Option("--id", help="Record id (repeatable)")],
        retention_class: Annotated[
            AfterRelease, typer.Option("--retention-class", help="Class after release")
        ] = AfterRelease.standard,
        policy: PolicyOpt = "policies/default.yaml",
        store: StoreOpt = None,
        receipts: ReceiptsOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Lift a legal hold; a deferred erasure of the record is applied at once."""
        from memlife.erase import EraseError, release_hold
        from memlife.holds import HoldError

        db = open_store(check_store(store, must_exist=True))
        try:
            result = release_hold(
                db, ids, retention_class=RetentionClass(retention_class), policy=policy,
                receipts=receipts,
            )  # fmt: skip
        except (EraseError, HoldError) as exc:
            raise fail(str(exc), exc.exit_code) from None
        finally:
            db.close()
        _report(result, json_out)
        if result.get("not_found"):
            raise typer.Exit(3)
        if not result.get("released") and not result.get("erasures"):
            # every id is a record and none was held: nothing changed (the receipt says so);
            # exit 0 would read as a release to a script
            raise fail(f"nothing released: not held: {', '.join(result['not_held'])}", 1)

    app.add_typer(hold, name="hold")
