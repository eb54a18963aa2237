"""A run whose evidence was removed shows (session 29 compliance review): the erase run's
folder, dataset files and operation receipts removed left no trace in `receipts list`,
`history` or the next run, and `verify` of the later runs still passed. Each run that
changes records names the store's run before it (`previous_run`), and verify of the next
run says when that run is gone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from memlife.audit import FileSink
from memlife.cli import app
from memlife.journal import open_journal
from memlife.run_chain import advance
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good

runner = CliRunner()


def test_the_run_after_a_removed_run_names_it(home: Path, tmp_path: Path) -> None:
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n" + json.dumps(good("m-2", subject="dogs")) + "\n")
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0
    res = runner.invoke(app, ["run", "--engine", "local", "--json"])
    night = json.loads(res.stdout)["run_id"]
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json"])
    erased = json.loads(res.stdout)["run_id"]
    res = runner.invoke(app, ["run", "--engine", "local", "--dry-run", "--json"])
    assert res.exit_code == 0  # a dry run is not in the chain
    res = runner.invoke(app, ["run", "--engine", "local", "--now", "2026-12-05T01:00:00Z",
                              "--allow-future-cutoff", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    later = json.loads(res.stdout)["run_id"]
    receipts = home / "receipts"

    def receipt(run_id: str) -> dict:
        (path,) = receipts.rglob(f"runs/*/*/*/{run_id}/receipt.json")
        return json.loads(path.read_text())

    assert receipt(erased)["previous_run"] == night and receipt(later)["previous_run"] == erased
    res = runner.invoke(app, ["receipts", "verify", later, "--json"])
    assert res.exit_code == 0, res.stdout

    # the erase run's evidence removed entirely: its folder, dataset files, receipts
    ops = [p for p in (receipts / "operations").glob("*.json")
           if json.loads(p.read_text())["run_id"] == erased]  # fmt: skip
    assert ops
    for p in ops:
        p.unlink()
    (folder,) = receipts.rglob(f"runs/*/*/*/{erased}")
    shutil.rmtree(folder)
    for d in receipts.rglob(f"run_id={erased}"):
        shutil.rmtree(d)
    res = runner.invoke(app, ["receipts", "verify", later, "--json"])
    out = json.loads(res.stdout)
    assert res.exit_code == 1
    assert {"code": "PREVIOUS_RUN_MISSING", "previous_run": erased} in out["problems"]


def test_a_rerun_names_the_same_run_before_it(home: Path) -> None:
    here, there = FileSink(home / "receipts"), FileSink(home / "elsewhere")
    with SqliteStore(home / "memlife.db") as store:
        journal = open_journal(store)
        assert advance(journal, "r1", here) is None
        assert advance(journal, "r2", here) == "r1"
        assert advance(journal, "r2", here) == "r1"  # the same run again (a crash, a rerun)
        assert advance(journal, "x1", there) is None  # another location: its own chain
        assert advance(journal, "r3", here) == "r2"


def test_a_run_whose_receipts_went_elsewhere_is_not_missing(home: Path, tmp_path: Path) -> None:
    """Session 29 review: an erase with `--receipts` of another location made the next
    night's verify report PREVIOUS_RUN_MISSING; each location keeps its own chain."""
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n" + json.dumps(good("m-2", subject="dogs")) + "\n")
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0
    elsewhere = f"file://{tmp_path / 'other-receipts'}"
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-1", "--yes",
                              "--receipts", elsewhere])  # fmt: skip
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["run", "--engine", "local", "--json"])
    night = json.loads(res.stdout)["run_id"]
    res = runner.invoke(app, ["receipts", "verify", night, "--json"])
    assert res.exit_code == 0, res.stdout


def test_verify_latest_shows_the_latest_run_removed_whole(home: Path, tmp_path: Path) -> None:
    """Session 29 "Left": a run's `previous_run` is checked by verify of the run after it,
    so the latest run removed whole showed only once a next run existed. `receipts verify
    latest` reads the latest run from the store's journal and says when it is gone."""
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n" + json.dumps(good("m-2", subject="dogs")) + "\n")
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0
    import sqlite3

    def tables() -> set[str]:
        with sqlite3.connect(home / "memlife.db") as db:
            return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    before = tables()
    none = runner.invoke(app, ["receipts", "verify", "latest"])
    assert none.exit_code == 1  # nothing has changed records yet (the import is no run)
    assert tables() == before  # and a reading command created no journal
    res = runner.invoke(app, ["run", "--engine", "local", "--json"])
    night = json.loads(res.stdout)["run_id"]
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json"])
    erased = json.loads(res.stdout)["run_id"]
    assert runner.invoke(app, ["run", "--engine", "local", "--dry-run"]).exit_code == 0
    ok = runner.invoke(app, ["receipts", "verify", "latest", "--json"])
    assert ok.exit_code == 0, ok.stdout
    assert json.loads(ok.stdout)["run_id"] == erased != night  # the dry run is not in it
    only = runner.invoke(app, ["receipts", "verify", "latest", "--evidence-only"])
    assert only.exit_code == 2  # the latest run is the journal's to say

    receipts = home / "receipts"
    for p in receipts.glob("operations/*.json"):
        if json.loads(p.read_text())["run_id"] == erased:
            p.unlink()
    (folder,) = receipts.rglob(f"runs/*/*/*/{erased}")
    shutil.rmtree(folder)
    for d in receipts.rglob(f"run_id={erased}"):
        shutil.rmtree(d)
    gone = runner.invoke(app, ["receipts", "verify", "latest", "--json"])
    assert gone.exit_code == 1
    assert {"code": "LATEST_RUN_MISSING", "latest_run": erased} in json.loads(gone.stdout)[
        "problems"
    ]
