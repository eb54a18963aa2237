"""Open a SQLite file in WAL mode, safe when several processes open a new file at once."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

# SQLITE_BUSY and SQLITE_LOCKED: another connection holds the lock (primary result codes)
_LOCK_CODES = (5, 6)


def is_lock_error(e: sqlite3.Error) -> bool:
    """Another connection holds the lock (SQLITE_BUSY or SQLITE_LOCKED)."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is None:  # raised by the module, not by SQLite: no code to read
        return "locked" in str(e)
    return code & 0xFF in _LOCK_CODES


def rollback(conn: sqlite3.Connection) -> None:
    """ROLLBACK the open transaction, unless SQLite already rolled it back itself: a full
    disk (SQLITE_FULL) or an I/O error undoes the whole transaction, and a ROLLBACK then
    raised "cannot rollback - no transaction is active" in place of the error that
    happened (the operator read that, not that the disk was full)."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def connect_wal(path: str | Path, *, timeout: float = 30.0) -> sqlite3.Connection:
    """An autocommit connection usable from any thread, the file in WAL mode.

    Two connections switching a new file to WAL together get "database is locked" at
    once: SQLite does not call its busy handler for that switch (4 processes opening one
    new file: 19 of 30 trials failed). The switch is retried, with backoff, until
    ``timeout`` in all (each try's busy wait is cut to the time left); any other error,
    or a lock held past it, is raised, and the connection closed."""
    conn = sqlite3.connect(
        str(path), check_same_thread=False, isolation_level=None, timeout=timeout
    )
    deadline = time.monotonic() + timeout
    delay = 0.002
    try:
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.Error as e:
                left = deadline - time.monotonic()
                if not is_lock_error(e) or left <= 0:
                    raise
                time.sleep(min(delay, left))
                delay = min(delay * 2, 0.1)
                conn.execute(f"PRAGMA busy_timeout={max(int(left * 1000), 1)}")
        conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
    except BaseException:
        conn.close()
        raise
    return conn


def existing_tables(path: str | Path, *, timeout: float = 30.0) -> dict[str, set[str]] | None:
    """The tables of an existing SQLite file, each name (lower case: SQLite's names ignore
    case) with its column names, read without writing to it (no pragma set, no journal
    mode switched); None for no file or an empty one (a new store). A file that is not
    SQLite, or is damaged, raises ``sqlite3.DatabaseError``."""
    try:
        if Path(path).stat().st_size == 0:
            return None
    except FileNotFoundError:
        return None
    conn = sqlite3.connect(str(path), timeout=timeout)
    try:
        q = "SELECT name FROM sqlite_master WHERE type='table'"
        names = [str(name) for (name,) in conn.execute(q)]
        cols = "SELECT name FROM pragma_table_info(?)"
        return {n.lower(): {str(c).lower() for (c,) in conn.execute(cols, (n,))} for n in names}
    finally:
        conn.close()
