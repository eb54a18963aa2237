"""One run secret for two stores that a test compares (audit 50c2).

A replacement's id is keyed by its store's run secret (group_plan.consolidation_key), made
at random by the first run. Two stores seeded alike therefore write the same replacements
under different ids. A test that holds a run to be deterministic (same seed, cutoff and
secret: the same store and the same operations) gives both stores this secret before their
first run, so the comparison stays whole: ids included."""

from __future__ import annotations

from pathlib import Path

from memlife.journal.sqlite import SqliteJournal

SHARED = bytes(range(32))


def give(db: str | Path, secret: bytes = SHARED) -> None:
    """Store ``secret`` as the run secret of the journal in the SQLite file ``db`` (the
    embedded store's own file, or ``$MEMLIFE_HOME/journal.db`` of a store that is not
    SQLite). Refused where the file already has another: its ids are already made."""
    journal = SqliteJournal.at(db)
    try:
        with journal.lock:
            conn = journal.connection
            conn.execute("INSERT OR IGNORE INTO secrets VALUES ('run', ?)", (secret,))
            got = conn.execute("SELECT value FROM secrets WHERE name='run'").fetchone()[0]
        if bytes(got) != secret:
            raise AssertionError(f"{db} already has another run secret")
    finally:
        journal.connection.close()
