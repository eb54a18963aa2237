"""Audit 44a (session 44): the run chain after the session 43 upgrade (``run_chain._chain``): the row an
older memlife kept under the folder as spelt is read only until the chain has a row under
its resolved name; after that, the old row is stale and must never be read again."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.audit import FileSink
from memlife.cli import app
from memlife.journal import open_journal
from memlife.run_chain import NAME, _name
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good

runner = CliRunner()


def _night(now: str) -> str:
    res = runner.invoke(app, ["run", "--engine", "local", "--now", now,
                              "--allow-future-cutoff", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    return str(json.loads(res.stdout)["run_id"])


def test_two_nights_after_the_upgrade_chain_to_each_other_not_to_the_old_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A default install (relative `.memlife`) kept its chain under the spelt name before
    the upgrade (emulated: the row renamed). Two nights run after the upgrade. Must hold:
    the second names the first as the run before it (the stale pre-upgrade row would
    name the night before the upgrade again, and `verify latest` would check it)."""
    for var in ("MEMLIFE_STORE", "MEMLIFE_RECEIPTS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MEMLIFE_HOME", ".memlife")
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n" + json.dumps(good("m-2", subject="dogs")) + "\n")
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0
    _night("2026-12-01T01:00:00Z")
    sink = FileSink(".memlife/receipts")
    spelt = f"{NAME}:{hashlib.sha256(sink.location('runs').encode()).hexdigest()[:16]}"
    with SqliteStore(tmp_path / ".memlife" / "memlife.db") as store:
        journal = open_journal(store)
        with journal.lock:
            journal.connection.execute("UPDATE secrets SET name=? WHERE name=?",
                                       (spelt, _name(sink)))  # fmt: skip
            journal.connection.commit()
    first = _night("2026-12-02T01:00:00Z")
    second = _night("2026-12-03T01:00:00Z")
    (path,) = (tmp_path / ".memlife" / "receipts").rglob(f"runs/*/*/*/{second}/receipt.json")
    assert json.loads(path.read_text())["previous_run"] == first
    res = runner.invoke(app, ["receipts", "verify", "latest", "--json"])
    assert json.loads(res.stdout)["run_id"] == second
