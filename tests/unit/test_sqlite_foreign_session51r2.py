"""Another application's database that holds a table named like one of memlife's.

Audit 51r2, attacking audit 51h's refusal (`stores/sqlite.py::_refuse_foreign`). A file is
taken as a store as soon as one of its tables bears a memlife table's name, and several of
those names are ones any application uses (`operations`, `secrets`, `leases`, `derived`,
`embeddings`, `records`): `SqliteStore` then switched the other application's file to WAL,
added memlife's tables and overwrote its ``user_version`` (3 -> 6), the very writes 51h
meant to refuse; with a foreign `records` (or `tombstones`) table it switched the file to
WAL and then failed with SQLite's bare "no such column: actor_id", naming no file.
`memlife export --store` of such a path exited 0 having rewritten it.
"""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.errors import StoreError
from memlife.journal import SqliteJournal
from memlife.model import MemoryRecord
from memlife.stores.sqlite import STORE_VERSION, SqliteStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
GENERIC = ["operations", "secrets", "leases", "derived", "embeddings", "records", "tombstones"]


def other_app(path: Path, table: str) -> str:
    """Another application's database (rollback journal, schema version 3) with a table
    that bears one of memlife's names but holds the application's own columns."""
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, title TEXT, body TEXT)")
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute(f"INSERT INTO {table} (title, body) VALUES ('t', 'b')")
    con.execute("PRAGMA user_version=3")
    con.commit()
    con.close()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def state(path: Path) -> tuple[str, int, list[str]]:
    con = sqlite3.connect(path)
    try:
        mode = con.execute("PRAGMA journal_mode").fetchone()[0]
        version = con.execute("PRAGMA user_version").fetchone()[0]
        q = "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"
        tables = [n for (n,) in con.execute(q)]
    finally:
        con.close()
    return mode, version, tables


@pytest.mark.parametrize("table", GENERIC)
def test_a_foreign_table_bearing_a_memlife_name_is_refused_and_left_as_it_was(
    tmp_path: Path, table: str
) -> None:
    path = tmp_path / "app.db"
    digest = other_app(path, table)
    with pytest.raises(StoreError, match="app.db"):
        SqliteStore(path).close()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert state(path) == ("delete", 3, sorted([table, "users"]))


def test_export_of_an_application_db_with_an_operations_table_writes_nothing(
    home: Path, tmp_path: Path
) -> None:
    path = tmp_path / "app.db"
    digest = other_app(path, "operations")
    res = CliRunner().invoke(app, ["export", "--store", f"sqlite:///{path}"])
    assert res.exit_code != 0 and "app.db" in res.output, res.output
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def test_control_memlife_files_of_every_kind_still_open(tmp_path: Path) -> None:
    """A store, a file the journal created first (its whole schema), the home's journal
    file, a file holding only memlife's side tables, and a store with a table an operator
    added for their own queries all open as stores."""
    with SqliteStore(tmp_path / "store.db") as store:
        store.put_many([MemoryRecord(id="m-1", actor_id="u-1", namespace="/u/f",
                                     memory_type="semantic", content="likes tea",
                                     created_at=T0)])  # fmt: skip
    journal = SqliteJournal.at(tmp_path / "journal.db")
    journal.connection.close()
    side = tmp_path / "side.db"
    con = sqlite3.connect(side)
    con.execute("CREATE TABLE review_items (item_id TEXT PRIMARY KEY, record_id TEXT NOT NULL)")
    con.execute("CREATE TABLE pending_erasures (record_id TEXT PRIMARY KEY, actor_id TEXT)")
    con.close()
    mine = tmp_path / "mine.db"
    with SqliteStore(mine):
        pass
    con = sqlite3.connect(mine)
    con.execute("CREATE TABLE my_notes (id INTEGER PRIMARY KEY, note TEXT)")
    con.execute("ANALYZE")
    con.close()
    for name in ("store.db", "journal.db", "side.db", "mine.db"):
        with SqliteStore(tmp_path / name) as store:
            assert store.count() == (1 if name == "store.db" else 0)
        assert state(tmp_path / name)[:2] == ("wal", STORE_VERSION)
