"""A tired operator's typos in the environment (adversarial review, second round): each is
a one-line error naming the variable (exit 2), and the store is left exactly as it was.

Before: ``file:/x`` (one slash) sent receipts to the relative folder ``x`` minus its
first character, a misspelled S3 receipts parameter sent them to AWS itself, a bad
``MEMLIFE_STATE`` was ignored unless given as ``--state``, and a value that did not parse
printed a traceback and exited 1.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.demo import generate
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import NOW


def _digest(db: Path) -> str:
    store = SqliteStore(db)
    try:
        rows = store.connection.execute("SELECT * FROM records ORDER BY id").fetchall()
    finally:
        store.close()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("MEMLIFE_RECEIPTS", "file:/tmp/memlife-one-slash", "two slashes"),
        ("MEMLIFE_RECEIPTS", "file:receipts-here", "two slashes"),
        ("MEMLIFE_RECEIPTS", "file:///tmp/x ", "spaces"),
        ("MEMLIFE_RECEIPTS", "s3://bkt/p?endpointurl=http://127.0.0.1:9", "unknown parameter"),
        ("MEMLIFE_RECEIPTS", "s3:///p", "names no bucket"),
        ("MEMLIFE_STATE", "garbage://x", "MEMLIFE_STATE"),
        ("MEMLIFE_LEASE_TTL_SECONDS", "abc", "MEMLIFE_LEASE_TTL_SECONDS"),
    ],
)
def test_a_bad_setting_stops_the_run_before_anything_changes(
    home: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    db = home / "memlife.db"
    store = SqliteStore(db)
    store.put_many(list(generate(300, seed=3, anchor=NOW)))
    store.close()
    before = _digest(db)
    monkeypatch.setenv(variable, value)
    res = CliRunner().invoke(
        app, ["run", "--engine", "local", "--now", NOW.isoformat()], catch_exceptions=False
    )
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output
    assert _digest(db) == before
    assert not Path("mp").exists() and not Path("ceipts-here").exists()  # the old misreadings
