"""Audit 43f (session 43): session 43 names a FileSink's run chain by its resolved folder
(``run_chain._name``). Before, the name hashed the folder as spelt, and the default home is
the relative ``.memlife``: every default install's chain was kept under the relative
spelling. After the upgrade the chain must still be found there."""

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


def _as_spelt_before(sink: FileSink) -> str:
    """The chain's name as memlife wrote it before session 43 (the folder as spelt)."""
    return f"{NAME}:{hashlib.sha256(sink.location('runs').encode()).hexdigest()[:16]}"


def test_the_default_relative_home_keeps_its_run_chain_across_the_upgrade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A default install (MEMLIFE_HOME the relative `.memlife`) ran a night with an older
    memlife, which kept its chain under the relative spelling (emulated: the row renamed
    to that name). After the upgrade, `receipts verify latest` must still find that night,
    and the next night must name it as the run before it (else a night removed whole just
    before the upgrade is never noticed: PREVIOUS_RUN_MISSING has nothing to compare)."""
    for var in ("MEMLIFE_STORE", "MEMLIFE_RECEIPTS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MEMLIFE_HOME", ".memlife")
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n" + json.dumps(good("m-2", subject="dogs")) + "\n")
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0
    night = json.loads(runner.invoke(app, ["run", "--engine", "local", "--json"]).stdout)
    sink = FileSink(".memlife/receipts")
    with SqliteStore(tmp_path / ".memlife" / "memlife.db") as store:
        journal = open_journal(store)
        with journal.lock:
            journal.connection.execute(
                "UPDATE secrets SET name=? WHERE name=?", (_as_spelt_before(sink), _name(sink))
            )
            journal.connection.commit()
    res = runner.invoke(app, ["receipts", "verify", "latest", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["run_id"] == night["run_id"]
    res = runner.invoke(app, ["run", "--engine", "local", "--now", "2026-12-30T01:00:00Z",
                              "--allow-future-cutoff", "--json"])  # fmt: skip
    later = json.loads(res.stdout)["run_id"]
    (path,) = (tmp_path / ".memlife" / "receipts").rglob(f"runs/*/*/*/{later}/receipt.json")
    assert json.loads(path.read_text())["previous_run"] == night["run_id"]
