"""Session 49 (left by audit 49vi, now set): the home's side files zero what they delete.

For a store without a SQLite file of its own (AgentCore without MEMLIFE_STATE), the
inferred subjects, review items and quarantine snapshots live in ``$MEMLIFE_HOME``
(`state/local.side_connection`). The store's own file, the journal and the kept answers
set ``secure_delete``; these did not, so on a SQLite built without that default an erased
record's inferred subject words stayed in free pages. This machine's build defaults to on,
so the test opens the side files through a SQLite whose default is off (each new
connection starts with ``secure_delete=OFF``, as such a build's would).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import memlife.state.local as local
from memlife.state.side import SQLITE_SCHEMA
from tests.unit.test_guards_session37d import _RemoteStore


class _BuildWithoutSecureDelete:
    """The ``sqlite3`` module as a build without SQLITE_SECURE_DELETE behaves."""

    def __getattr__(self, name: str) -> Any:
        return getattr(sqlite3, name)

    @staticmethod
    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = sqlite3.connect(*args, **kwargs)
        conn.execute("PRAGMA secure_delete=OFF")
        return conn


@pytest.mark.parametrize("filename", ["inferred.db", "reviews.db", "quarantine.db"])
def test_each_side_file_of_the_home_deletes_securely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, filename: str
) -> None:
    monkeypatch.delenv("MEMLIFE_STATE", raising=False)
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    monkeypatch.setattr(local, "sqlite3", _BuildWithoutSecureDelete())
    conn, _ = local.side_connection(_RemoteStore(), filename, SQLITE_SCHEMA, "quarantine_snapshots")
    try:
        assert conn.execute("PRAGMA secure_delete").fetchone() == (1,)
    finally:
        conn.close()
