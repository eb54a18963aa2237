"""The import written as an adversary would race it: another connection writes or erases
while the import runs, in worker processes taking turns (``import_turns``) and in this
process.

Each guarantee is checked on what the store and the report hold afterwards, whatever the
interleaving was; a scenario is run again (up to three times) until the interleaving it is
about actually happened, so a run where the import finished first cannot pass as a race.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import memlife.importer as importer
from memlife.erase import erase
from memlife.importer import ImportReport, import_file
from memlife.model import parse_record_line
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import assert_no_erased_content_active
from tests.support.records import good

NOW = datetime(2026, 6, 1, tzinfo=UTC)
LINES = 2400
SECRET = "The door code is 4821."
ACTOR = "u-1"


@pytest.fixture(autouse=True)
def _small_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    # many small turns, so the other connection lands between (and inside) them
    monkeypatch.setattr(importer, "BLOCK_BYTES", 8192)
    monkeypatch.setattr(importer, "ROWS_BATCH", 30)
    monkeypatch.setattr(importer, "BATCH", 30)


def _line(i: int, content: str | None = None) -> str:
    return json.dumps(good(f"m-{i:05d}", content=content or f"Fact number {i} about tea."))


def _wait_for(store: SqliteStore, sql: str, stop: threading.Event) -> bool:
    """Poll on the racing connection until ``sql`` finds a row (the import has written)."""
    while not stop.is_set():
        if store.connection.execute(sql).fetchone():
            return True
        time.sleep(0.001)
    return False


def _race(
    tmp_path: Path,
    name: str,
    lines: list[str],
    workers: int,
    other: Callable[[Path, threading.Event], Any],
) -> tuple[SqliteStore, ImportReport, Any]:
    """Import ``lines`` with ``workers`` while ``other(db, stop)`` runs on a thread with its
    own connection; the store, the import's report and what ``other`` returned."""
    db = tmp_path / f"{name}.db"
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(line + "\n" for line in lines))
    store = SqliteStore(db)
    stop, result = threading.Event(), {}
    thread = threading.Thread(target=lambda: result.setdefault("v", other(db, stop)))
    thread.start()
    try:
        report = import_file(store, src, now=NOW, workers=workers)
    finally:
        stop.set()
        thread.join()
    return store, report, result.get("v")


@pytest.mark.parametrize("workers", [0, 2])
def test_an_erasure_racing_the_import_leaves_no_erased_text_active(
    home: Path, tmp_path: Path, workers: int
) -> None:
    """The secret is in the file under many ids. Once the import has written the first,
    another connection erases it: every later copy is refused (ERASED_CONTENT) in the
    same transaction as the write, every earlier copy goes with the erasure, and every
    other line is stored."""
    lines = [
        _line(i, content=SECRET) if i % 97 == 5 else _line(i) for i in range(LINES)
    ]  # fmt: skip
    secret_ids = {f"m-{i:05d}" for i in range(LINES) if i % 97 == 5}

    def erase_first_copy(db: Path, stop: threading.Event) -> dict[str, Any] | None:
        with SqliteStore(db) as other:
            sql = "SELECT id FROM records WHERE id = 'm-00005'"
            if _wait_for(other, sql, stop):
                return erase(other, ACTOR, ids=["m-00005"], now=NOW)
        return None

    for attempt in range(3):
        store, report, erased = _race(tmp_path, f"e{attempt}", lines, workers, erase_first_copy)
        try:
            assert erased is not None, "the erasure never saw the first copy written"
            assert_no_erased_content_active(store, ACTOR)
            stored = {r[0] for r in store.connection.execute("SELECT id FROM records")}
            refused = {c["id"] for c in report.conflicts}
            assert {c["code"] for c in report.conflicts} <= {"ERASED_CONTENT"}
            assert refused <= secret_ids
            assert not stored & secret_ids  # each copy erased or refused, none left
            assert stored == {f"m-{i:05d}" for i in range(LINES)} - secret_ids
            assert report.imported == LINES - len(refused)
            if refused:  # the erasure landed while the import still had copies to write
                return
        finally:
            store.close()
    pytest.fail("the import finished before the erasure in three attempts: no race")


@pytest.mark.parametrize("workers", [0, 2])
def test_an_outside_writer_during_the_import_is_never_overwritten(
    home: Path, tmp_path: Path, workers: int
) -> None:
    """Another connection inserts records under ids the file holds further on, while the
    import runs. Each id ends up with exactly one writer's record: the outside one (the
    import reports ID_EXISTS for that line) or the file's (the outside insert was refused
    with ID_EXISTS); never a mix, never one overwriting the other."""
    lines = [_line(i) for i in range(LINES)]
    contested = [f"m-{i:05d}" for i in range(LINES - 400, LINES, 7)]
    outside = {
        rid: parse_record_line(json.dumps(good(rid, content=f"Written outside {rid}.")))
        for rid in contested
    }

    def insert_contested(db: Path, stop: threading.Event) -> set[str]:
        won: set[str] = set()
        with SqliteStore(db) as other:
            if _wait_for(other, "SELECT 1 FROM records LIMIT 1", stop):
                for record in outside.values():  # one transaction each: interleaved
                    won.update(other.insert_new([record]).succeeded)
        return won

    for attempt in range(3):
        store, report, won = _race(tmp_path, f"w{attempt}", lines, workers, insert_contested)
        try:
            rows = dict(store.connection.execute("SELECT id, content FROM records"))
            assert len(rows) == LINES
            refused = {c["id"] for c in report.conflicts}
            assert {c["code"] for c in report.conflicts} <= {"ID_EXISTS"}
            assert refused == won  # the import refused exactly the ids the outside won
            for rid in contested:
                want = (
                    outside[rid].content if rid in won else f"Fact number {int(rid[2:])} about tea."
                )
                assert rows[rid] == want, rid
            assert all(
                rows[f"m-{i:05d}"] == f"Fact number {i} about tea." for i in range(LINES - 400)
            )
            assert report.imported == LINES - len(refused)
            if won:  # it started after the import's first write: it landed inside the import
                return
        finally:
            store.close()
    pytest.fail("the import finished before the outside writer in three attempts: no race")
