"""Audit 49i: an import killed part-way and run again must report what the whole import
reports (the importer's "running the same import again finishes it").

The stored lines of the killed run come back as ``unchanged`` on the rerun. The import's
two after-the-fact warnings were only computed for rows the current run wrote: a line
imported as superseded whose replacement is nowhere (REPLACEMENT_NOT_ACTIVE, invariant 3)
and a record a receipted removal had taken out (PREVIOUSLY_DELETED). The killed run never
got to report them (it died first), and the rerun said nothing: exit 0, no warning, while
the same file imported in one go warns both.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import memlife.importer as importer
from memlife import faults
from memlife.errors import InjectedFault
from memlife.importer import ImportWorkerError, import_file
from memlife.model import parse_record_line
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good
from tests.unit.test_import_removed import _removed

NOW = datetime(2026, 6, 1, tzinfo=UTC)
GONE = "m-0001"  # removed with a receipt, brought back by the file
BROKEN = "m-0003"  # superseded by a record that is nowhere


def _lines() -> list[str]:
    out = []
    for i in range(200):
        d = good(f"m-{i:04d}")
        if d["id"] == BROKEN:
            d["status"] = "superseded"
            d["provenance"] = {**d["provenance"], "replaced_by": "m-nowhere"}
        out.append(json.dumps(d))
    return out


def _store(path: Path) -> SqliteStore:
    """A store whose journal holds a receipted removal of GONE (same content as the file)."""
    store = SqliteStore(path)
    gone = parse_record_line(json.dumps(good(GONE)))
    _removed(store, "manual-20260301-aaaa", gone, datetime(2026, 3, 1, tzinfo=UTC))
    return store


def _warned(report: importer.ImportReport) -> list[tuple[Any, str, str]]:
    return [(w["line"], w["id"], w["code"]) for w in report.warnings]


@pytest.fixture()
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small blocks and transactions: a kill leaves a prefix of the file stored."""
    monkeypatch.setattr(importer, "ROWS_BATCH", 10)
    monkeypatch.setattr(importer, "BLOCK_BYTES", 8192)


def _killed_then_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> tuple[importer.ImportReport, int]:
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(_lines()) + "\n")
    store = _store(tmp_path / "killed.db")
    if workers:  # a worker process killed inside its third transaction
        monkeypatch.setenv("MEMLIFE_FAULT", "import_commit:2")
        monkeypatch.setenv("MEMLIFE_FAULT_MODE", "kill")
        with pytest.raises(ImportWorkerError, match="running the same import again"):
            import_file(store, src, now=NOW, workers=workers)
        monkeypatch.delenv("MEMLIFE_FAULT")
    else:  # this process: the third block's parse fails, what was handed over is stored
        with faults.inject("import_chunk", skip=2), pytest.raises(InjectedFault):
            import_file(store, src, now=NOW, workers=0)
    (stored,) = store.connection.execute("SELECT count(*) FROM records").fetchone()
    try:
        return import_file(store, src, now=NOW, workers=workers), stored
    finally:
        store.close()


def _whole(tmp_path: Path, workers: int) -> importer.ImportReport:
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(_lines()) + "\n")
    with _store(tmp_path / "whole.db") as store:
        return import_file(store, src, now=NOW, workers=workers)


@pytest.mark.parametrize("workers", [0, 1], ids=["in-process", "workers"])
def test_the_whole_import_warns_the_broken_link_and_the_removed_record(
    home: Path, tmp_path: Path, small: None, workers: int
) -> None:
    """Control: imported in one go, the file is warned twice."""
    report = _whole(tmp_path, workers)
    assert report.imported == 200
    assert _warned(report) == [
        (4, BROKEN, "REPLACEMENT_NOT_ACTIVE"),
        (None, GONE, "PREVIOUSLY_DELETED"),
    ]


@pytest.mark.parametrize("workers", [0, 1], ids=["in-process", "workers"])
def test_a_rerun_after_a_killed_import_warns_what_the_whole_import_warns(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: None, workers: int
) -> None:
    """The killed run stored both lines (a prefix of the file) and died before warning;
    the rerun finds them unchanged and must still warn them, as the whole import does."""
    report, stored = _killed_then_rerun(tmp_path, monkeypatch, workers)
    assert 4 <= stored < 200  # both lines were in the killed run's stored prefix
    assert report.unchanged == stored and report.imported == 200 - stored
    assert _warned(report) == _warned(_whole(tmp_path, workers))


def test_importing_the_same_file_again_still_warns_the_broken_link(
    home: Path, tmp_path: Path
) -> None:
    """The store still holds what the warnings are about: a second import of the same file
    (every line unchanged) says so again rather than exit 0 in silence."""
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(_lines()) + "\n")
    with _store(tmp_path / "twice.db") as store:
        first = import_file(store, src, now=NOW, workers=0)
        again = import_file(store, src, now=NOW, workers=0)
    assert again.unchanged == 200 and again.imported == 0
    assert _warned(again) == _warned(first)
