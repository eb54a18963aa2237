"""The import worker's write (memlife/import_ingest.py) stores exactly the row path's rows.

A batch binds as an Arrow table through ADBC's SQLite driver when the store holds no
tombstone and no id of the batch; otherwise the batch goes through SqliteStore.insert_rows.
Either way the stored rows (values and SQLite types) and what the write reports are the
row path's. The writer is the only connection this process holds while it is open (the
driver has its own SQLite library): each test opens the store only around it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import memlife.import_ingest as ingest
from memlife import faults
from memlife.demo import generate
from memlife.errors import InjectedFault
from memlife.import_ingest import IngestWriter
from memlife.import_table import rows_table
from memlife.model import MemoryRecord, parse_record_line
from memlife.stores.sqlite import COLUMNS, SqliteStore, record_to_row
from memlife.tombstones import add as add_tombstones
from tests.support.records import good

_REPO = Path(__file__).resolve().parents[2]
_TYPES = "SELECT " + ", ".join(f"typeof({c})" for c in COLUMNS) + " FROM records ORDER BY id"


def _records() -> list[MemoryRecord]:
    out = list(generate(60, seed=5))
    out.append(parse_record_line(json.dumps(good("m-super", status="superseded",
                                                  provenance={"replaced_by": "m-new"}))))  # fmt: skip
    out.append(parse_record_line(json.dumps(good("m-caf", content='Caf\u00e9 \u2028 "ok".'))))
    return out


def _table(records: list[MemoryRecord], first_line: int = 1) -> Any:
    return rows_table([(n, record_to_row(r), False) for n, r in enumerate(records, first_line)])


def _stored(path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    with SqliteStore(path) as store:
        con = store.connection
        return con.execute("SELECT * FROM records ORDER BY id").fetchall(), con.execute(
            _TYPES
        ).fetchall()


def _by_store(path: Path, records: list[MemoryRecord]) -> tuple[list[Any], list[Any], Any]:
    """What SqliteStore.insert_rows stores and reports for the same rows."""
    with SqliteStore(path) as store:
        res = store.insert_rows([record_to_row(r) for r in records])
    return (*_stored(path), res)


def _write(path: Path, table: Any) -> Any:
    writer = IngestWriter(path)
    try:
        return writer.write(table)
    finally:
        writer.close()


def test_a_plain_batch_binds_arrow_and_stores_the_row_paths_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = _records()
    want_rows, want_types, _ = _by_store(tmp_path / "rows.db", records)
    SqliteStore(tmp_path / "s.db").close()

    def refuse(self: IngestWriter, batch: Any) -> Any:
        raise AssertionError("a plain batch went through the store")

    monkeypatch.setattr(IngestWriter, "_through_store", refuse)
    flushed = _write(tmp_path / "s.db", _table(records))
    rows, types = _stored(tmp_path / "s.db")
    assert rows == want_rows and types == want_types
    assert flushed.imported == len(records) and not flushed.conflicts
    assert flushed.superseded == [(len(records) - 1, "m-super")]


def test_stored_ids_go_through_the_store(tmp_path: Path) -> None:
    """Ids already stored (as they are): the store's own checks judge the batch."""
    records = _records()
    path = tmp_path / "s.db"
    with SqliteStore(path) as store:
        store.put_many(records[:3])
    flushed = _write(path, _table(records))
    assert flushed.unchanged == 3 and flushed.imported == len(records) - 3
    assert not flushed.conflicts and len(_stored(path)[0]) == len(records)


def test_a_store_with_tombstones_checks_each_row(tmp_path: Path) -> None:
    """Erased content comes back in a batch that is otherwise plain: refused
    (ERASED_CONTENT), nothing of it written, the rest stored."""
    records = _records()
    path = tmp_path / "s.db"
    erased = parse_record_line(json.dumps(good("m-gone", content="Erased statement.")))
    with SqliteStore(path) as store:
        add_tombstones(store, [erased])
    again = parse_record_line(json.dumps(good("m-again", content="erased  STATEMENT")))
    flushed = _write(path, _table([*records, again]))
    assert flushed.conflicts == [
        {"line": len(records) + 1, "id": "m-again", "code": "ERASED_CONTENT"}
    ]
    assert flushed.imported == len(records)
    assert "m-again" not in {r[0] for r in _stored(path)[0]}


def test_tombstones_of_other_actors_leave_the_batch_plain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a batch with a tombstoned actor, or a row naming sources, needs the row checks
    (insert_rows asks the same): an import into a store that saw erasures stays fast."""
    records = [r for r in _records() if r.actor_id != "u-1"]
    path = tmp_path / "s.db"
    erased = parse_record_line(json.dumps(good("m-gone", content="Erased statement.")))
    with SqliteStore(path) as store:
        add_tombstones(store, [erased])  # actor u-1's
    through: list[int] = []
    real = IngestWriter._through_store

    def spy(self: IngestWriter, batch: Any) -> Any:
        through.append(batch.num_rows)
        return real(self, batch)

    monkeypatch.setattr(IngestWriter, "_through_store", spy)
    assert _write(path, _table(records[:20])).imported == 20
    assert through == []
    naming = parse_record_line(
        json.dumps(
            good("m-src", actor_id=records[0].actor_id, provenance={"supersedes": ["m-gone"]})
        )
    )
    flushed = _write(path, _table([*records[20:30], naming]))
    assert through == [11]  # names a source: checked row by row (another actor's erasure)
    assert flushed.imported == 11 and not flushed.conflicts


def test_an_erasure_committed_after_the_writer_opened_is_seen(tmp_path: Path) -> None:
    """An erasure in another process, while the worker's connection is open and idle: the
    next batch's plain-or-not decision reads the tombstones inside its own transaction, so
    the erased text is refused, not written."""
    records = _records()
    path = tmp_path / "s.db"
    SqliteStore(path).close()
    writer = IngestWriter(path)  # this process holds only the driver's connection now
    try:
        assert writer.write(_table(records[:5])).imported == 5  # plain: no tombstones yet
        erase = (
            "import json, sys\n"
            "from memlife.model import parse_record_line\n"
            "from memlife.stores.sqlite import SqliteStore\n"
            "from memlife.tombstones import add\n"
            "from tests.support.records import good\n"
            "with SqliteStore(sys.argv[1]) as s:\n"
            "    add(s, [parse_record_line(json.dumps(good('m-gone', content='Secret text.')))])\n"
        )
        subprocess.run([sys.executable, "-c", erase, str(path)], check=True, cwd=_REPO)
        again = parse_record_line(json.dumps(good("m-again", content="Secret text.")))
        flushed = writer.write(_table([*records[5:10], again], first_line=6))
    finally:
        writer.close()
    assert flushed.conflicts == [{"line": 11, "id": "m-again", "code": "ERASED_CONTENT"}]
    assert "m-again" not in {r[0] for r in _stored(path)[0]}


def test_a_fault_inside_the_write_leaves_nothing_and_the_writer_usable(tmp_path: Path) -> None:
    records = _records()
    path = tmp_path / "s.db"
    SqliteStore(path).close()
    writer = IngestWriter(path)
    try:
        with faults.inject("import_commit"), pytest.raises(InjectedFault):
            writer.write(_table(records))
        assert writer.write(_table(records[:5])).imported == 5  # rolled back, not stuck
    finally:
        writer.close()
    assert len(_stored(path)[0]) == 5


def test_a_database_error_is_judged_by_the_store(tmp_path: Path) -> None:
    """The primary key refuses the batch (one id twice in it, two texts): undone whole, then the
    store's path writes it, the first copy stored and the second ID_EXISTS, as
    insert_rows says of the same rows."""
    records = _records()
    twice = [*records[:10], records[3].model_copy(update={"content": "Another text."})]
    want_rows, want_types, res = _by_store(tmp_path / "rows.db", twice)
    assert [f.code for f in res.failed] == ["ID_EXISTS"]
    SqliteStore(tmp_path / "s.db").close()
    flushed = _write(tmp_path / "s.db", _table(twice))
    assert _stored(tmp_path / "s.db") == (want_rows, want_types)
    assert flushed.imported == 10
    assert flushed.conflicts == [{"line": 11, "id": records[3].id, "code": "ID_EXISTS"}]
    assert ingest._refused(ValueError("a bug of ours")) is False


def test_a_path_with_uri_characters_opens_the_file_itself(tmp_path: Path) -> None:
    folder = tmp_path / "a dir?x=1#y"
    folder.mkdir()
    SqliteStore(folder / "s.db").close()
    assert _write(folder / "s.db", _table(_records()[:4])).imported == 4
    assert len(_stored(folder / "s.db")[0]) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a dir?x=1#y"]
