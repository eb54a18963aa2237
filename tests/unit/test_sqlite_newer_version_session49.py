"""Session 49 (left by audit 49h, now refused): a store file a newer memlife upgraded.

``_upgrade`` acted only on an older file: one at a later ``user_version`` (a newer memlife
ran on it, then the operator rolled back) was opened and written as it was, this version's
fold keys mixed among the newer one's (a duplicate the newer fold would see, missed; a
statement key another memlife reads differently). It is now refused when opened, naming the
file and both versions, before any write; the CLI exits as on any store error.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from memlife.errors import StoreError
from memlife.stores.sqlite import STORE_VERSION, SqliteStore
from tests.unit.test_guards_session35 import rec


def _file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _newer(path: Path) -> None:
    with SqliteStore(path) as s:
        s.put_many([rec("m-1")])
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version={STORE_VERSION + 1}")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


def test_a_file_from_a_newer_memlife_is_refused_before_any_write(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    _newer(path)
    before = _file_sha(path)
    with pytest.raises(StoreError, match=rf"version {STORE_VERSION + 1}.*newer memlife") as info:
        SqliteStore(path)
    assert str(path) in str(info.value) and f"up to version {STORE_VERSION}" in str(info.value)
    assert _file_sha(path) == before  # no schema, no row, no version written


def test_the_cli_names_it_and_exits_as_on_a_store_error(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from memlife.cli import app

    path = tmp_path / "m.db"
    _newer(path)
    res = CliRunner().invoke(app, ["recall", "coffee", "--actor", "u-1", "--store",
                                   f"sqlite:///{path}"])  # fmt: skip
    assert res.exit_code not in (0, 2) and "newer memlife" in res.output, res.output


def test_control_a_file_at_this_version_or_older_opens(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with SqliteStore(path) as s:
        s.put_many([rec("m-1")])
    with SqliteStore(path) as s:
        assert s.get("m-1") is not None
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version={STORE_VERSION - 1}")
    con.close()
    with SqliteStore(path) as s:
        assert s.get("m-1") is not None
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == STORE_VERSION
    con.close()
