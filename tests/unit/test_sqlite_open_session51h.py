"""A store path that names no memlife store is refused, naming the file, before any write.

Audit 51h. `SqliteStore` switched whatever SQLite file it was given to WAL, created its
tables in it and stamped its ``user_version``: `memlife export --store sqlite:///app.db`
(a mistyped path, another application's database) exited 0 having rewritten that file: its
journal mode changed for good, four memlife tables added, and the other application's own
schema version (``PRAGMA user_version``, which many applications migrate by) overwritten
with memlife's. A file that is not SQLite at all, or a store file cut short, was refused
with SQLite's bare "file is not a database" / "database disk image is malformed", naming no
file (a night opens the store, the journal and the caches, in several files).
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
from memlife.model import MemoryRecord
from memlife.stores.sqlite import STORE_VERSION, SqliteStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def rec(i: int) -> MemoryRecord:
    return MemoryRecord(id=f"m-{i}", actor_id="u-1", namespace="/users/u-1/facts",
                        memory_type="semantic", content=f"fact number {i} " * 20,
                        created_at=T0)  # fmt: skip


def other_app(path: Path) -> str:
    """Another application's SQLite database (rollback journal, its own schema version)."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO users (name) VALUES ('ada')")
    con.execute("PRAGMA user_version=3")
    con.commit()
    con.close()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def state(path: Path) -> tuple[str, int, list[str]]:
    con = sqlite3.connect(path)
    try:
        mode = con.execute("PRAGMA journal_mode").fetchone()[0]
        version = con.execute("PRAGMA user_version").fetchone()[0]
        tables = [n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    finally:
        con.close()
    return mode, version, tables


def test_another_applications_sqlite_file_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    digest = other_app(path)
    with pytest.raises(StoreError, match="app.db"):
        SqliteStore(path).close()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert state(path) == ("delete", 3, ["users"])


def test_export_from_another_applications_file_fails_and_writes_nothing(
    home: Path, tmp_path: Path
) -> None:
    path = tmp_path / "app.db"
    digest = other_app(path)
    res = CliRunner().invoke(app, ["export", "--store", f"sqlite:///{path}"])
    assert res.exit_code != 0 and "app.db" in res.output, res.output
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def test_a_file_that_is_not_sqlite_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"not a database, just notes\n" * 200)
    with pytest.raises(StoreError, match="notes.db") as caught:
        SqliteStore(path).close()
    assert "not a SQLite" in str(caught.value)
    assert path.read_bytes() == b"not a database, just notes\n" * 200


def test_a_store_file_cut_short_is_refused_naming_the_file(tmp_path: Path) -> None:
    whole = tmp_path / "whole.db"
    with SqliteStore(whole) as store:
        store.put_many([rec(i) for i in range(2000)])
        store.checkpoint()
    cut = tmp_path / "cut.db"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])  # a copy cut short
    with pytest.raises(StoreError, match="cut.db"):
        SqliteStore(cut).close()


def test_control_new_empty_and_memlife_files_open(tmp_path: Path) -> None:
    """A new path, an empty file (a placeholder `touch`ed by a deploy), a store, and a file
    another memlife part created first (the journal's table) all open as stores."""
    for name in ("new.db", "empty.db"):
        if name == "empty.db":
            (tmp_path / name).write_bytes(b"")
        with SqliteStore(tmp_path / name) as store:
            store.put_many([rec(1)])
        assert state(tmp_path / name)[:2] == ("wal", STORE_VERSION)
    with SqliteStore(tmp_path / "new.db") as again:
        assert again.count() == 1
    first = tmp_path / "journal-first.db"
    con = sqlite3.connect(first)
    con.execute("CREATE TABLE operations (operation_id TEXT PRIMARY KEY)")
    con.close()
    with SqliteStore(first) as store:
        assert store.count() == 0
