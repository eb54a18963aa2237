"""`memlife review list | show | resolve`: review items as a workflow (memlife.review_queue)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from memlife.cli.common import (
    JsonOpt,
    ReceiptsOpt,
    StoreOpt,
    check_store,
    console,
    err_console,
    fail,
    print_id_table,
    print_json,
    printable,
    safe,
)
from memlife.stores import open_store
from memlife.stores.base import MemoryStore

PolicyOpt = Annotated[str, typer.Option("--policy")]


def register(app: typer.Typer) -> None:
    # the help is memlife/cli/__init__.py's COMMANDS line (test_cli_basics checks they agree)
    group = typer.Typer(help="Review items: list them, show one with its text, resolve them (journaled, receipted).",
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
        all_: Annotated[bool, typer.Option("--all", help="Resolved and waiting items too")] = False,
        waiting: Annotated[
            bool,
            typer.Option("--waiting", help="Findings past the nightly budget, oldest first"),
        ] = False,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Open (and disputed) review items, highest priority first; ids and codes only."""
        from memlife.errors import InputError
        from memlife.review_queue import ReviewError, ReviewQueue
        from memlife.review_queue.show import review_reason
        from memlife.run_scope import check_namespaces

        # a filter that can match nothing is refused: "0 review items" reads as an empty queue
        if reason is not None:
            try:
                reason = review_reason(reason)
            except ReviewError as exc:
                raise fail(str(exc), exc.exit_code) from None
        if waiting and all_:
            raise fail("--waiting lists the findings that wait, --all every item: use one")
        db = open_store(check_store(store, must_exist=True))
        try:
            if namespace is not None:
                try:  # an unrooted glob, as `run --namespace` refuses it
                    check_namespaces(db, [namespace])
                except InputError as exc:  # "namespace 'x' must start with '/' ..."
                    raise fail(f"--{exc}", exc.exit_code) from None
            states = (
                ("waiting",) if waiting
                else ("open", "disputed", "waiting", "resolved") if all_
                else ("open", "disputed")
            )  # fmt: skip
            items = ReviewQueue.for_store(db).list(owner=owner, reason=reason, namespace=namespace,
                                                   actor=actor, states=states)  # fmt: skip
        finally:
            db.close()
        if waiting:  # the longest waiting first (the one that has gained the most)
            items.sort(key=lambda i: (i.first_seen_at or i.opened_at, i.item_id))
        if json_out:
            print_json([i.as_json() for i in items])
            return
        columns = ("item", "record", "pair", "reason", "owner", "namespace", "type", "priority",
                   "nights", "state", "first found")  # fmt: skip
        rows = [(i.item_id, i.record_id, i.pair_id or "", i.reason, i.owner or "", i.namespace,
                 i.memory_type or "", f"{i.priority:.2f}", i.nights, i.state,
                 (i.first_seen_at or "")[:10]) for i in items]  # fmt: skip
        what = "waiting review findings" if waiting else "review items"
        print_id_table(f"{len(items)} {what}", columns, rows, ids={"item", "record", "pair"})

    @group.command("show")
    def show(
        item: Annotated[str, typer.Argument(help="Review item id (rv-...)")],
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """One item and what it asks about: its record's text and dates (and its pair's)."""
        from memlife.review_queue.show import show as do_show

        with _review_store(store) as db:
            found = do_show(db, item)
        if json_out:
            print_json(found)
            return
        it = found["item"]
        _lines(f"review item {it['item_id']}", [
            ("reason", it["reason"]), ("state", it["state"]), ("nights", it["nights"]),
            ("priority", f"{it['priority']:.2f}"), ("owner", it["owner"] or "-"),
            ("actor", it["actor_id"]), ("namespace", it["namespace"]),
            ("opened" if it["state"] != "waiting" else "waiting since",
             f"{it['opened_at']} (run {it['opened_run']})"),
            *([("first found", it["first_seen_at"])]
              if it.get("first_seen_at") and it["first_seen_at"] != it["opened_at"] else []),
            ("last seen", f"{it['last_seen_at']} (run {it['last_seen_run']})"),
            *([("decision", f"{it['decision']} by {it['reviewer']} at {it['resolved_at']}")]
              if it["decision"] else []),
        ])  # fmt: skip
        _record(f"record {it['record_id']}", found["record"], it)
        if it["pair_id"]:
            _record(f"pair {it['pair_id']} (the newer record, which probably replaces it)",
                    found["pair"], it)  # fmt: skip
        err_console.print(f"seen: {found['seen']} (resolve with --seen {found['seen']} to refuse "
                          "a decision if a night changes these texts first)", markup=False)  # fmt: skip

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
        seen: Annotated[
            str | None,
            typer.Option(
                "--seen", help="The token `review show` printed: refused if the texts changed since"
            ),
        ] = None,
        policy: PolicyOpt = "policies/default.yaml",
        store: StoreOpt = None,
        receipts: ReceiptsOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Carry out a reviewer's decision: journaled and receipted with the reviewer's identity."""
        from memlife.review_queue import ReviewDecision
        from memlife.review_queue import resolve as do_resolve

        if decision not in {d.value for d in ReviewDecision}:
            raise fail(f"--decision {decision!r}: use keep, verify, supersede, delete or dispute")
        with _review_store(store) as db:
            result = do_resolve(
                db, item, decision, reviewer, by=by, policy=policy, receipts=receipts, seen=seen
            )
        if json_out:
            print_json(result)
        else:
            it = result["item"]
            if result.get("finished_run"):  # the record was changed by that attempt already
                err_console.print(f"finished the decision run {result['finished_run']} left "
                                  "unfinished (killed before its receipt)", markup=False)  # fmt: skip
            # the replacing record is named as such: "supersede by ana" read as if ana were it
            replaced = f" (replaced by {by or it['pair_id']})" if decision == "supersede" else ""
            err_console.print(
                printable(f"{it['item_id']} (record {it['record_id']}): {decision}{replaced} "
                          f"by reviewer {reviewer} -> {it['state']}"), markup=False, highlight=False,
            )  # fmt: skip
            err_console.print(
                printable(f"run {result['run_id']}: {result['status']}; receipt: "
                          f"{result['receipt']}"), markup=False, highlight=False,
            )  # fmt: skip
        if result["status"] != "success":
            raise typer.Exit(3)

    app.add_typer(group, name="review")


def _lines(title: str, fields: list[tuple[str, object]]) -> None:
    """A title and ``name  value`` lines of stored data: never markup, controls escaped."""
    console.print(f"[bold]{safe(title)}[/bold]", markup=True, soft_wrap=True)
    for name, value in fields:
        console.print(f"  {name:<17} {printable(value)}", soft_wrap=True)


def _record(title: str, rec: dict[str, object] | None, it: dict[str, str]) -> None:
    if rec is None:
        _lines(title, [("content", f"(gone: no longer in {it['actor_id']} {it['namespace']})")])
        return
    _lines(title, [
        ("status", rec["status"]), ("memory_type", rec["memory_type"]),
        ("created_at", rec["created_at"]), ("expires_at", rec["expires_at"] or "-"),
        ("last_verified_at", rec["last_verified_at"] or "-"),
        *([("replaced_by", rec["replaced_by"])] if rec["replaced_by"] else []),
        *([("changed", "since the item was opened (a night asks about the new content)")]
          if rec["changed_since_opened"] else []),
        ("content", rec["content"]),
    ])  # fmt: skip


@contextmanager
def _review_store(store: str | None) -> Iterator[MemoryStore]:
    """The store a review command reads or changes, closed after; a ReviewError (an item
    not found, a decision refused) is the command's error, with its exit code."""
    from memlife.review_queue import ReviewError

    db = open_store(check_store(store, must_exist=True))
    try:
        yield db
    except ReviewError as exc:
        raise fail(str(exc), exc.exit_code) from None
    finally:
        db.close()
