"""The operation journal (state machine in base.py; one backend per file)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import partial
from types import SimpleNamespace
from typing import Any

from memlife.journal.base import (
    ALLOWED,
    GroupInReview,
    Journal,
    JournalStateError,
    MemoOutcome,
    Mover,
    Operation,
    OpKind,
    OpState,
    Outcome,
    Rejection,
    checked_secret,
    operation_id,
)
from memlife.journal.sqlite import (
    SqliteJournal,
    db_file,
    has_table,
    read_outcomes,
    read_supersede_times,
)
from memlife.settings import settings

__all__ = [
    "ALLOWED",
    "GroupInReview",
    "Journal",
    "JournalStateError",
    "MemoOutcome",
    "Mover",
    "OpKind",
    "OpState",
    "Operation",
    "Outcome",
    "Rejection",
    "SqliteJournal",
    "open_journal",
    "open_chain_reader",
    "open_memo_reader",
    "open_supersede_link",
    "open_supersede_times",
    "operation_id",
    "read_run_secret",
]


def open_journal(store: object) -> Journal:
    """Beside the store: the same SQLite file for the embedded store; else the state backend
    of $MEMLIFE_STATE (DynamoDB), else its own file under $MEMLIFE_HOME (one machine only)."""
    conn = getattr(store, "connection", None)
    if conn is not None:
        return SqliteJournal(conn, getattr(store, "lock", None))
    from memlife.state import uses_remote_state

    remote = uses_remote_state(store)
    if remote is not None:
        from memlife.journal.dynamodb import DynamoJournal

        return remote.part("journal", DynamoJournal)
    from memlife.state.home import check_home

    check_home(store)  # the home's journal is one store's (state/home.py)
    return SqliteJournal.at(settings().home / "journal.db")


def _read_only(store: object) -> tuple[sqlite3.Connection, threading.RLock] | Journal | None:
    """The store's journal to read, never created: the store's own SQLite file (its
    connection), the DynamoDB journal, or the home's file opened read-only; None where no
    journal exists yet. Dry runs and reading commands ask this, never ``open_journal``."""
    conn = getattr(store, "connection", None)
    if conn is not None:
        return conn, getattr(store, "lock", None) or threading.RLock()
    from memlife.state import uses_remote_state

    remote = uses_remote_state(store)
    if remote is not None:
        from memlife.journal.dynamodb import DynamoJournal

        return remote.part("journal", DynamoJournal)  # reads: get, query, batch_get
    from memlife.state.home import check_home

    check_home(store)
    path = settings().home / "journal.db"
    if not path.exists():
        return None
    ro = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
    return ro, threading.RLock()


def read_run_secret(store: object) -> bytes | None:
    """The store's run secret (``Journal.run_secret``) where one was made, read and never
    created: a dry run keys its replacements' ids as the apply run will (group_plan.
    consolidation_key) yet writes nothing. None where none exists yet."""
    found = _read_only(store)
    if isinstance(found, tuple):
        conn, lock = found
        try:
            with lock:
                if not has_table(conn, "secrets"):
                    return None
                row = conn.execute("SELECT value FROM secrets WHERE name='run'").fetchone()
                # as the apply run reads it: a damaged one is refused (audit 51a)
                return checked_secret(row[0], f"journal {db_file(conn)}") if row else None
        finally:
            if conn is not getattr(store, "connection", None):  # the home's file, opened here
                conn.close()
    reader = getattr(found, "existing_run_secret", None)
    return reader() if reader is not None else None


def open_memo_reader(
    store: object,
) -> Callable[[Sequence[str]], dict[str, MemoOutcome]] | None:
    """The consolidation memo (``Journal.outcomes``), read-only, for a dry run: it must
    estimate what an apply run would send, yet never create or write the journal. None
    where no journal exists yet (nothing is settled)."""
    found = _read_only(store)
    if isinstance(found, tuple):
        return partial(read_outcomes, *found) if _has_memo(*found) else None
    return found.outcomes if found is not None else None


SupersedeTimes = Callable[[Sequence[str], Mapping[str, tuple[str, str]]], dict[str, datetime]]


def open_supersede_times(store: object) -> SupersedeTimes | None:
    """When (wall clock) each record's latest supersede was done, read-only: planning asks
    in dry runs too, which never create the journal. None where no journal exists yet."""
    found = _read_only(store)
    if isinstance(found, tuple):
        return partial(read_supersede_times, *found)
    return partial(supersede_times_via, found) if found is not None else None


def supersede_times_via(
    journal: Journal, record_ids: Sequence[str], scopes: Mapping[str, tuple[str, str]] | None = None
) -> dict[str, datetime]:
    """``read_supersede_times`` over any journal (``for_records``: read together)."""
    out: dict[str, datetime] = {}
    removed = (OpKind.delete, OpKind.erase, OpKind.purge)
    for rid, ops in journal.for_records(record_ids).items():
        mine = [(o, o.updated_at) for o in ops if o.record_id == rid and o.updated_at is not None
                and (scopes is None or scopes.get(rid) == (o.actor_id, o.namespace))]  # fmt: skip
        gone = [at for o, at in mine if o.kind in removed
                and o.outcome in (Outcome.deleted, Outcome.already_absent)]  # fmt: skip
        # planned before the latest removal: the removed record's, however late it moved
        done = [at for o, at in mine if o.kind is OpKind.supersede
                and (not gone or (o.created_at or at) > max(gone))]  # fmt: skip
        if done:
            out[rid] = max(done)
    return out


# (content hash, replacement id) of a record's latest done supersede; None: none known
SupersedeLink = tuple[str | None, str | None] | None


def open_supersede_link(store: object) -> Callable[[str, str, str], SupersedeLink] | None:
    """(record id, actor, namespace) -> what the record's latest supersede in that scope
    saw and where it pointed (content hash, replacement id), read-only: a record gone since
    (superseded retention) still tells what it said and what replaced it (run_planning.
    _stands_for, audit 53b). None where no journal exists yet."""
    found = _read_only(store)
    if isinstance(found, tuple):
        return partial(_read_supersede_link, *found)
    return partial(_supersede_link_via, found) if found is not None else None


def _read_supersede_link(
    conn: sqlite3.Connection, lock: threading.RLock, rid: str, actor: str, ns: str
) -> SupersedeLink:
    with lock:
        if not has_table(conn, "operations"):
            return None
        row = conn.execute(
            "SELECT content_sha256, replacement_id FROM operations WHERE kind='supersede' "
            "AND outcome='superseded' AND record_id=? AND actor_id=? AND namespace=? "
            "ORDER BY updated_at DESC LIMIT 1", (rid, actor, ns),
        ).fetchone()  # fmt: skip
    return (row[0], row[1]) if row is not None else None


def _supersede_link_via(journal: Journal, rid: str, actor: str, ns: str) -> SupersedeLink:
    done = [o for o in journal.for_record(rid) if o.record_id == rid
            and o.kind is OpKind.supersede and o.outcome is Outcome.superseded
            and (o.actor_id, o.namespace) == (actor, ns)]  # fmt: skip
    if not done:
        return None
    last = max(done, key=lambda o: o.updated_at.timestamp() if o.updated_at else 0.0)
    return last.content_sha256, last.replacement_id


def open_chain_reader(store: object) -> Any | None:
    """The store's journal to read its run chain from (memlife/run_chain.py ``latest``),
    never creating it; None where none exists yet."""
    found = _read_only(store)
    if isinstance(found, tuple):
        return SimpleNamespace(connection=found[0], lock=found[1])
    return found


def _has_memo(conn: sqlite3.Connection, lock: threading.RLock) -> bool:
    with lock:
        return has_table(conn, "consolidation_outcomes")
