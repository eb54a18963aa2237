"""Each run names the run before it on its store: a run whose evidence was removed shows.

A run whose whole evidence was taken out of the receipts location (its folder, dataset
files and operation receipts; a delete marker hides them on a versioned bucket) left no
trace: `receipts list` and `history` showed nothing and the next run noticed nothing
(session 29 compliance review). The store's journal now keeps its latest run, and every
run that changes records (nightly, retry, manual) names the one before it in its receipt
(``previous_run``), read under the store's lease. ``receipts verify`` of any later run
reports PREVIOUS_RUN_MISSING when that run is not in the receipts location, and
``receipts verify latest`` LATEST_RUN_MISSING when the latest is not. A chain is
kept per receipts location (a run whose receipts went elsewhere, `--receipts`, is in that
location's chain, not missing from this one's). Dry runs change nothing and are not in it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from memlife.audit import FileSink, ReceiptSink

NAME = "run_chain"


def _name(sink: ReceiptSink) -> str:
    where = sink.location("runs")
    if isinstance(sink, FileSink):  # one folder, however it is spelt (relative, '..', links)
        where = str(sink.root.resolve() / "runs")
    return f"{NAME}:{hashlib.sha256(where.encode()).hexdigest()[:16]}"


def _chain(journal: Any, sink: ReceiptSink) -> dict[str, Any]:
    """The chain under its name, else under the folder as spelt (before session 43: the
    default home is the relative ``.memlife``), so an upgrade keeps its chain."""
    spelt = f"{NAME}:{hashlib.sha256(sink.location('runs').encode()).hexdigest()[:16]}"
    return _stored(journal, _name(sink)) or _stored(journal, spelt)


def _stored(journal: Any, name: str) -> dict[str, Any]:
    """The chain as the journal keeps it ({} for none): one meta item of the DynamoDB
    journal, else a row of the SQLite journal's secrets table (read only if it is there:
    ``latest`` may read a store's own file before any run made the journal)."""
    if hasattr(journal, "state"):  # the DynamoDB journal (MEMLIFE_STATE)
        from memlife.state.dynamodb import key

        item = journal.state.get(key("meta", name))
        return json.loads(item["chain"]["S"]) if item else {}
    from memlife.journal.sqlite import has_table

    with journal.lock:
        if not has_table(journal.connection, "secrets"):
            return {}
        row = journal.connection.execute(
            "SELECT value FROM secrets WHERE name=?", (name,)
        ).fetchone()
    return json.loads(row[0]) if row else {}


def latest(journal: Any, sink: ReceiptSink) -> str | None:
    """The store's latest run in ``sink``'s location (None: none changed records there).
    ``receipts verify latest`` checks it: a latest run removed whole shows at once, not
    only once a later run names it."""
    run = _chain(journal, sink).get("run")
    return run if isinstance(run, str) else None


def before_latest(journal: Any, sink: ReceiptSink) -> str | None:
    """The run before the store's latest in ``sink``'s location (None: none)."""
    run = _chain(journal, sink).get("previous")
    return run if isinstance(run, str) else None


def advance(journal: Any, run_id: str, sink: ReceiptSink) -> str | None:
    """Make ``run_id`` the store's latest run in ``sink``'s location; the run before it
    there (None for the first). A rerun of the latest run (the same id after a crash)
    names the same run as before."""
    name = _name(sink)
    if hasattr(journal, "state"):  # the DynamoDB journal (MEMLIFE_STATE): one meta item
        from memlife.state.dynamodb import key

        previous = _previous(_chain(journal, sink), run_id)
        chain = json.dumps({"run": run_id, "previous": previous})
        item = {**key("meta", name), "chain": {"S": chain}}
        journal.state.ddb.put_item(TableName=journal.state.table, Item=item)
        return previous
    with journal.lock:  # the SQLite journal: a row of its secrets table, read and written
        previous = _previous(_chain(journal, sink), run_id)
        journal.connection.execute(
            "INSERT OR REPLACE INTO secrets VALUES (?, ?)",
            (name, json.dumps({"run": run_id, "previous": previous}).encode()),
        )
        return previous


def _previous(stored: dict[str, Any], run_id: str) -> str | None:
    latest = stored.get("run")
    return stored.get("previous") if latest == run_id else latest
