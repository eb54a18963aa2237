"""`memlife review list | resolve`: review items as a workflow (memlife.review_queue)."""

from __future__ import annotations

from typing import Annotated

import typer

from memlife.cli.common import (
    JsonOpt,
    ReceiptsOpt,
    StoreOpt,
    check_store,
    err_console,
    fail,
    print_id_table,
    print_json,
    printable,
)
from memlife.stores import open_store

PolicyOpt = Annotated[str, typer.Option("--policy")]


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Review items: list them, resolve them (journaled, receipted).",
                        no_args_is_help=True)  # fmt: skip

    @group.command("list")
    def list_(
        owner: Annotated[
            str | None, typer.Option("--owner", help="Only this owner's items")
        ] = None,
        reason: Annotated[
            str | None, typer.Option("--reason", help="Only this reason (e.g. POSSIBLE_UPDATE)")
        ] = None,
        namespace: Annotated[
            str | None,
            typer.Option("--namespace", help="Namespace or glob: * one segment, ** any number"),
        ] = None,
        actor: Annotated[
            str | None, typer.Option("--actor", help="Only this actor's items")
        ] = None,
        all_: Annotated[bool, typer.Option("--all", help="Resolved items too")] = False,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Open (and disputed) review items, highest priority first; ids and codes only."""
        from memlife.review_queue import ReviewQueue

        db = open_store(check_store(store, must_exist=True))
        try:
            states = ("open", "disputed", "resolved") if all_ else ("open", "disputed")
            items = ReviewQueue.for_store(db).list(owner=owner, reason=reason, namespace=namespace,
                                                   actor=actor, states=states)  # fmt: skip
        finally:
            db.close()
        if json_out:
            print_json([i.as_json() for i in items])
            return
        columns = ("item", "record", "pair", "reason", "owner", "namespace", "type", "priority",
                   "nights", "state")  # fmt: skip
        rows = [(i.item_id, i.record_id, i.pair_id or "", i.reason, i.owner or "", i.namespace,
                 i.memory_type or "", f"{i.priority:.2f}", i.nights, i.state) for i in items]  # fmt: skip
        print_id_table(f"{len(items)} review items", columns, rows, ids={"item", "record", "pair"})

    @group.command("resolve")
    def resolve(
        item: Annotated[str, typer.Argument(help="Review item id (rv-...)")],
        decision: Annotated[
            str, typer.Option("--decision", help="keep | verify | supersede | delete | dispute")
        ],
        reviewer: Annotated[
            str, typer.Option("--reviewer", help="Who decides (written into the receipt)")
        ],
        by: Annotated[
            str | None,
            typer.Option("--by", help="supersede: the replacing record (pair items name it)"),
        ] = None,
        policy: PolicyOpt = "policies/default.yaml",
        store: StoreOpt = None,
        receipts: ReceiptsOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Carry out a reviewer's decision: journaled and receipted with the reviewer's identity."""
        from memlife.review_queue import ReviewDecision, ReviewError
        from memlife.review_queue import resolve as do_resolve

        if decision not in {d.value for d in ReviewDecision}:
            raise fail(f"--decision {decision!r}: use keep, verify, supersede, delete or dispute")
        db = open_store(check_store(store, must_exist=True))
        try:
            result = do_resolve(
                db, item, decision, reviewer, by=by, policy=policy, receipts=receipts
            )
        except ReviewError as exc:
            raise fail(str(exc), exc.exit_code) from None
        finally:
            db.close()
        if json_out:
            print_json(result)
        else:
            it = result["item"]
            if result.get("finished_run"):  # the record was changed by that attempt already
                err_console.print(f"finished the decision run {result['finished_run']} left "
                                  "unfinished (killed before its receipt)", markup=False)  # fmt: skip
            err_console.print(
                printable(f"{it['item_id']} ({it['record_id']}): {decision} by {reviewer} -> "
                          f"{it['state']}"), markup=False, highlight=False,
            )  # fmt: skip
            err_console.print(
                printable(f"run {result['run_id']}: {result['status']}; receipt: "
                          f"{result['receipt']}"), markup=False, highlight=False,
            )  # fmt: skip
        if result["status"] != "success":
            raise typer.Exit(3)

    app.add_typer(group, name="review")
