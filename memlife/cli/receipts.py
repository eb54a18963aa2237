"""`memlife receipts list | show | verify`: audit review of run evidence."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from memlife import run_chain
from memlife.audit import ReceiptSink, open_sink
from memlife.cli.common import (
    JsonOpt,
    ReceiptsOpt,
    StoreOpt,
    check_receipts,
    check_store,
    check_utf8,
    console,
    err_console,
    fail,
    plain,
    print_id_table,
    print_json,
    printable,
    safe,
)
from memlife.journal import open_chain_reader, open_journal
from memlife.lease import live_run
from memlife.model import parse_time
from memlife.review import find_run, misplaced_runs, verify_run
from memlife.stores import open_store, store_identity


def _day(value: str | None, option: str) -> date | None:
    """A YYYY-MM-DD day (a full ISO time is cut to its UTC day); one-line error otherwise."""
    if not value:
        return None
    try:
        if "T" in value:
            return parse_time(value).astimezone(UTC).date()
        return date.fromisoformat(value)
    except ValueError:
        raise fail(f"{option} {value!r}: expected a day, YYYY-MM-DD") from None


def _days(since: str | None, until: str | None) -> tuple[date | None, date | None]:
    """--since and --until as days; a range holding no day is refused, never read as "no
    evidence" (a history saying "no operation" reads as "never deleted")."""
    first, last = _day(since, "--since"), _day(until, "--until")
    if first is not None and last is not None and first > last:
        raise fail(f"--since {first} is after --until {last}: the range holds no day")
    return first, last


_EPOCH = datetime.min.replace(tzinfo=UTC)
LATEST = "latest"  # `receipts verify latest`: the store's latest run (memlife/run_chain.py)


def _sink(receipts: str | None) -> ReceiptSink:
    """The receipts sink; a bad URL is one line naming --receipts or MEMLIFE_RECEIPTS."""
    check_receipts(receipts)
    return open_sink(receipts)


ForStoreOpt = Annotated[
    str | None,
    typer.Option(
        "--for-store",
        help="Only runs of this store (its URL, as `run --store` takes it); runs whose "
        "manifest names no store are left out. MEMLIFE_STORE is not read here.",
    ),
]


def _identity(url: str) -> str:
    """The store a --for-store URL names (it need not exist any more: a reviewer may ask
    about a store since removed); one line naming the flag when it is no store URL."""
    from memlife.settings import store_url_problem

    problem = store_url_problem(url)
    if problem:
        raise fail(f"--for-store {url!r}: {problem}")
    return store_identity(url)


def _outcome(row: dict[str, object]) -> str:
    """An operation's outcome as a reviewer reads it: an erasure a legal hold deferred is
    `deferred` (its deferral receipt), not `failed`; it is applied once the hold goes."""
    if "ERASURE_DEFERRED" in (row.get("reason_codes") or []) and row.get("outcome") == "failed":  # type: ignore[operator]  # a JSON row: a list when present
        return "deferred (legal hold)"
    if row.get("after_seal"):  # its own receipt says so, not the run's sealed row (audit 52f)
        return f"{row.get('outcome')} (finished after its run's seal)"
    return str(row.get("outcome") or row.get("state") or "")


def register(app: typer.Typer) -> None:
    receipts_app = typer.Typer(help="Review run receipts (file:// or s3://).", no_args_is_help=True)
    app.add_typer(receipts_app, name="receipts")

    @receipts_app.command("list")
    def list_(
        since: Annotated[
            str | None, typer.Option("--since", help="First cutoff day, YYYY-MM-DD (UTC)")
        ] = None,
        until: Annotated[
            str | None, typer.Option("--until", help="Last cutoff day, YYYY-MM-DD (UTC)")
        ] = None,
        for_store: ForStoreOpt = None,
        receipts: ReceiptsOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Runs with their status, by processing cutoff (the runs/yyyy/mm/dd folders), newest
        last. Stores sharing one receipts location are told apart by the store column."""
        from memlife.receipts_history import runs_between

        store = _identity(for_store) if for_store is not None else None
        sink = _sink(receipts)
        runs = runs_between(sink, *_days(since, until))
        for copy in misplaced_runs(sink.list("runs/")):  # not listed: no run's evidence
            err_console.print(f"not listed: {copy} is not under its run's day "
                              "(`memlife receipts verify RUN_ID` names it)", markup=False)  # fmt: skip
        if store is not None:
            runs = [r for r in runs if r.store == store]
        if json_out:
            print_json([r.as_json() for r in runs])
            return
        columns: tuple[str, ...] = ("run id", "mode", "status", "policy", "started")
        rows: list[tuple[object, ...]] = [(r.run_id, j["mode"], j["status"], j["policy_version"], r.started_at[:19])
                for r, j in ((r, r.as_json()) for r in runs)]  # fmt: skip
        if len({r.store for r in runs}) > 1:  # one location, several stores: say whose
            columns += ("store",)
            rows = [(*row, r.store or "(not named)") for row, r in zip(rows, runs, strict=True)]
        print_id_table("memlife runs", columns, rows, ids={"run id"})

    @receipts_app.command("history")
    def history(
        record_id: Annotated[str, typer.Argument(help="The record id")],
        since: Annotated[
            str | None, typer.Option("--since", help="First cutoff day, YYYY-MM-DD")
        ] = None,
        until: Annotated[
            str | None, typer.Option("--until", help="Last cutoff day, YYYY-MM-DD")
        ] = None,
        actor: Annotated[
            str | None, typer.Option("--actor", help="Only this actor's record of that id")
        ] = None,
        for_store: ForStoreOpt = None,
        receipts: ReceiptsOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Every operation on one record across runs (from the operations dataset), oldest
        first. A record id is unique within an actor and store only: an id another actor or
        store reuses is told apart by the actor and store columns, or by --actor/--for-store."""
        from memlife.receipts_history import handed_on, record_history

        store = _identity(for_store) if for_store is not None else None
        check_utf8([record_id], "RECORD_ID")
        first, last = _days(since, until)
        gaps: list[dict[str, str]] = []  # evidence not read: a history with gaps is no answer
        rows = record_history(_sink(receipts), record_id, since=first, until=last, problems=gaps)
        if actor is not None:
            rows = [r for r in rows if r["actor_id"] == actor]
        if store is not None:
            rows = [r for r in rows if r["store"] == store]
        if len({r["actor_id"] for r in rows}) == 1:  # one record: follow its hand-overs
            rows += handed_on(_sink(receipts), rows, since=first, until=last)
            rows.sort(key=lambda r: (r["cutoff"] or _EPOCH, r["updated_at"] or _EPOCH))
        for gap in gaps:
            err_console.print(f"evidence not read: run {gap['run_id']} {gap['code']} ({gap['key']}); "
                              f"`memlife receipts verify {gap['run_id']}` says more", markup=False)  # fmt: skip
        if json_out:
            print_json(rows)
            if gaps or not rows:  # as the table: no operation found is exit 1
                raise typer.Exit(1)
            return
        if not rows:
            raise fail(
                f"no operation on {record_id} in the receipts"
                + (f", {len(gaps)} runs' evidence not read (above)" if gaps else ""),
                1,
            )
        columns: tuple[str, ...] = ("cutoff day", "run id", "actor", "mode", "action",
                                    "reasons", "outcome", "replacement")  # fmt: skip
        cells: list[tuple[object, ...]] = [(r["date"], r["run_id"], r["actor_id"], r["mode"] or "", r["action"],
                  ", ".join(r["reason_codes"] or []), _outcome(r),
                  r["replacement_id"] or "") for r in rows]  # fmt: skip
        for key, name in (("namespace", "namespace"), ("store", "store")):
            if len({r[key] for r in rows}) > 1:  # records of several scopes share this id
                columns += (name,)
                cells = [(*c, r[key] or "(not named)") for c, r in zip(cells, rows, strict=True)]
        print_id_table(f"history of {record_id}", columns, cells, ids={"run id", "replacement"})
        scopes = {(r["actor_id"], r["namespace"], r["store"]) for r in rows}
        if len(scopes) > 1:
            err_console.print(f"note: {len(scopes)} records (actor, namespace, store) have the "
                              f"id {record_id}; --actor and --for-store keep one")  # fmt: skip
        if gaps:  # what is shown is true, but may not be all
            raise typer.Exit(1)

    @receipts_app.command("show")
    def show(run_id: str, receipts: ReceiptsOpt = None, json_out: JsonOpt = False) -> None:
        """Counts and status of one run."""
        run = find_run(_sink(receipts), run_id)
        if run is None:
            raise fail(f"run {run_id} not found", 1)
        if json_out:
            print_json({"manifest": run.manifest, "receipt": run.receipt})
            return
        r = run.receipt or {}
        # the heading on a line of its own, wrapped by the terminal: as the narrow table's
        # title rich broke the run id in two ("...-apply-d7f" / "65eda05") at 80 columns
        console.print(
            Text(
                printable(f"{run_id}: {r.get('status', 'incomplete')} ({run.manifest.get('mode')})")
            ),
            soft_wrap=True,
        )
        table = Table()
        table.add_column("count")
        table.add_column("records", justify="right")
        counts = r.get("counts")
        for k, v in (counts if isinstance(counts, dict) else {}).items():
            table.add_row(plain(k), f"{v:,}" if isinstance(v, int) else plain(v))
        console.print(table)
        console.print(f"policy {run.manifest.get('policy_version')}  cutoff {run.manifest.get('cutoff')}  "
                      f"pagination complete: {r.get('pagination_complete')}  "
                      f"ids not deleted: {len(r.get('ids_not_deleted', []))}  "
                      f"next retry: {r.get('next_retry_at')}")  # fmt: skip

    @receipts_app.command("verify")
    def verify(run_id: str, receipts: ReceiptsOpt = None, store: StoreOpt = None,
               evidence_only: Annotated[bool, typer.Option(
                   "--evidence-only",
                   help="Check the receipts alone (digest, Parquet, operation receipts, counts): no store or journal needed.")] = False,
               json_out: JsonOpt = False) -> None:  # fmt: skip
        """Journal <-> receipts <-> Parquet <-> counts both ways, the run digest, and the store.
        RUN_ID ``latest``: the store's latest run in this receipts location (its journal
        keeps it); a latest run whose evidence is gone is LATEST_RUN_MISSING; one still under
        way (its lease held) is skipped for the run before it (LATEST_RUN_IN_PROGRESS)."""
        asked_latest, running = run_id == LATEST, run_id
        if evidence_only and asked_latest:
            raise fail("'latest' is read from the store's journal: drop --evidence-only")
        if evidence_only:
            result = verify_run(_sink(receipts), None, None, run_id, evidence_only=True)
        else:
            db = open_store(check_store(store, must_exist=True))
            try:
                if asked_latest:  # read without creating the journal (a store never run)
                    chain = open_chain_reader(db)
                    found = run_chain.latest(chain, _sink(receipts)) if chain else None
                    if found is None:
                        raise fail("no run of this store changed records in this receipts "
                                   "location: nothing is the latest", code=1)  # fmt: skip
                    run_id = running = found
                    if live_run(chain, db) == found:  # under way: nothing sealed yet
                        run_id = run_chain.before_latest(chain, _sink(receipts)) or ""
                        if not run_id:
                            raise fail(f"the latest run {safe(found)} is still under way and "
                                       "no run before it changed records in this receipts "
                                       "location: nothing finished to verify", code=1)  # fmt: skip
                result = verify_run(_sink(receipts), db, open_journal(db), run_id)
            finally:
                db.close()
            if asked_latest and any(p["code"] == "RUN_NOT_FOUND" for p in result.problems):
                result.problem("LATEST_RUN_MISSING", latest_run=run_id)
            if asked_latest and running != run_id:  # verified: the run before the live one
                result.note("LATEST_RUN_IN_PROGRESS", running=running, verified=run_id)
        if json_out:
            print_json(result.as_json())
        else:
            # another store's run first: its journal findings below follow from it
            other = [p for p in result.notes if p["code"] == "OTHER_STORE"]
            for p in other:
                console.print(f"[yellow]OTHER_STORE[/yellow] run_store={safe(p['run_store'])} "
                              f"store={safe(p['store'])}: the run changed another store; verify "
                              "it with --store set to that store (the journal findings below "
                              "follow from this)", markup=True)  # fmt: skip
            for p in result.problems:
                console.print(
                    f"[red]{safe(p['code'])}[/red] "
                    + " ".join(f"{k}={safe(v)}" for k, v in p.items() if k != "code"),
                    markup=True,
                )
            for p in result.notes:  # informational (e.g. RECORD_ID_REUSED): not a failure
                if p not in other:
                    console.print(
                        f"[yellow]{safe(p['code'])}[/yellow] "
                        + " ".join(f"{k}={safe(v)}" for k, v in p.items() if k != "code"),
                        markup=True,
                    )
            console.print(f"{safe(run_id)}: {result.operations} operations, {result.checked_records} records checked, "
                          + ("[green]verified[/green]" if result.ok else f"[red]{len(result.problems)} problems[/red]"),
                          markup=True)  # fmt: skip
        raise typer.Exit(0 if result.ok else 1)
