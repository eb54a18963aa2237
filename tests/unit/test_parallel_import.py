"""The parallel import (worker processes build rows) stores what the serial import stores.

The same mixed file (good, hostile, over-long, repeated ids, existing ids, erased content,
a last line without newline) imported with ``workers=0`` (this process) and with worker
processes gives byte-identical rows and the same report. Small blocks and small batches
put lines across block and batch boundaries. A worker that raises or dies stops the
import with whole batches stored, and running the import again finishes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import memlife.import_turns as import_turns
import memlife.importer as importer
from memlife import text
from memlife.cli import app
from memlife.demo import generate
from memlife.errors import RecordError
from memlife.fast_record import fast_record, fast_row
from memlife.import_table import rows_table
from memlife.import_write import row_content_chars
from memlife.importer import ImportWorkerError, import_file
from memlife.model import parse_record_line
from memlife.stores.sqlite import COLUMNS, SqliteStore, record_to_row
from memlife.tombstones import add as add_tombstones
from tests.support.records import good
from tests.unit.test_fast_record import lines

NOW = datetime(2026, 6, 1, tzinfo=UTC)
MAX_LINE = 3000
_WITH_TYPES = (
    "SELECT *, " + ", ".join(f"typeof({c})" for c in COLUMNS) + " FROM records ORDER BY id"
)


def _mixed_lines() -> list[bytes]:
    rng = random.Random(7)
    out = [r.to_json().encode() for r in generate(300, seed=9, anchor=NOW)]
    hostile = [
        b'{"id": "m-trunc", "actor_id": "u-1",',  # malformed: the column counts the newline
        b"\xff\xfe not utf-8",
        json.dumps(good("m-latin1", content="Caf.")).encode().replace(b"Caf.", b"Caf\xe9."),
        b"[" * 40 + b"]" * 40,
        b"   ",
        b"",
        b"x" * (MAX_LINE + 1),  # over the bound by one
        b"y" * (MAX_LINE + 700),
        b'{"id": "' + b"z" * (3 * MAX_LINE) + b'"}',  # spans several blocks
        json.dumps(good("m-naive", created_at="2026-01-02T10:00:00")).encode(),
        json.dumps(good("m-offset", created_at="2026-01-02T10:00:00+05:30")).encode(),
        json.dumps(good("m-future", created_at="2027-01-01T00:00:00Z")).encode(),
        json.dumps(good("m-super", status="superseded")).encode(),
        json.dumps(good("m-ns", namespace="/users/../x")).encode(),
        json.dumps(good("m-big", content="w" * (MAX_LINE - 600))).encode(),
        json.dumps(good("m-erased", content="Erased statement.")).encode(),
        json.dumps(good("m-src", provenance={"supersedes": ["m-gone"]})).encode(),
        json.dumps(good("m-exists", content="Another text.")).encode(),
        json.dumps(good("m-same", content="Same text.")).encode(),
        json.dumps(good("m-ok", content="Caf\u00e9 \u2028 ok.", subject=None)).encode(),
    ]
    for line in hostile:
        out.insert(rng.randrange(len(out)), line)
    for _ in range(40):  # repeated ids, some far apart
        out.insert(rng.randrange(len(out)), out[rng.randrange(len(out))])
    return out


def _store(path: Path, tombstones: bool = True) -> SqliteStore:
    """A store holding an existing id, an identical record and (unless not) tombstones."""
    store = SqliteStore(path)
    store.put_many(
        [
            parse_record_line(json.dumps(good("m-exists", content="Stored text."))),
            parse_record_line(json.dumps(good("m-same", content="Same text."))),
        ]
    )
    erased = [
        parse_record_line(json.dumps(good("m-gone", content="Erased statement."))),
        parse_record_line(json.dumps(good("m-g2", actor_id="u-000001", content="Gone too."))),
    ]
    if tombstones:
        add_tombstones(store, erased)
    return store


def _import(
    tmp_path: Path,
    name: str,
    src: Path,
    workers: int,
    *,
    records: bool = False,
    tombstones: bool = True,
) -> tuple[list[tuple], dict]:
    """``records``: the record path (parse_line, insert_new) every store other than
    SQLite takes; else the rows path (columnar, or per line; here or in workers). The rows
    come with each value's SQLite type (the workers bind Arrow, the row path Python)."""
    store = _store(tmp_path / f"{name}.db", tombstones)
    try:
        importer.ROWS_PATH = not records
        rep = import_file(store, src, now=NOW, max_line_bytes=MAX_LINE, workers=workers)
        rows = store.connection.execute(_WITH_TYPES).fetchall()
        return rows, {**rep.as_json(), "text": [str(e) for e in rep.invalid]}
    finally:
        importer.ROWS_PATH = True
        store.close()


@pytest.mark.parametrize(("workers", "tombstones"), [(0, True), (1, True), (2, True), (2, False)])
def test_worker_processes_store_the_serial_rows_and_report(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int, tombstones: bool
) -> None:
    """With tombstones in the store every worker batch is checked row by row (insert_rows);
    without, the workers bind Arrow (import_ingest) but where a stored id refuses a batch."""
    monkeypatch.setattr(importer, "BATCH", 37)
    monkeypatch.setattr(importer, "ROWS_BATCH", 37)  # the SQLite row path's
    monkeypatch.setattr(importer, "BLOCK_BYTES", 4096)
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(_mixed_lines()))  # the last line has no newline
    kw = {"tombstones": tombstones}
    serial_rows, serial = _import(tmp_path, "serial", src, workers=0, records=True, **kw)
    rows, report = _import(tmp_path, f"w{workers}", src, workers=workers, **kw)
    assert rows == serial_rows
    assert report == serial
    # the file exercises what it should: each kind of outcome is there
    codes = {c["code"] for c in serial["conflicts"]}
    erased = {"ERASED_CONTENT", "ERASED_SOURCE"}
    assert {"DUPLICATE_ID", "ID_EXISTS"} | (erased if tombstones else set()) <= codes
    assert tombstones or not codes & erased
    fields = {e["field"] for e in serial["invalid"]}
    assert {"<line>", "<json>", "<encoding>", "created_at", "namespace"} <= fields
    assert serial["unchanged"] == 1 and serial["warnings"]
    assert any("column" in e["reason"] for e in serial["invalid"])


def test_a_store_whose_path_is_not_utf8_imports_with_workers(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Session 12 review, left until session 19: a store at b"caf\\xe9.db" imported in this
    process and failed with workers (the writer's SQLite URI quoted the name as UTF-8)."""
    monkeypatch.setattr(importer, "BLOCK_BYTES", 4096)
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(_mixed_lines()))
    serial_rows, serial = _import(tmp_path, "serial", src, workers=0)
    name = os.fsdecode(b"caf\xe9")  # a str with a surrogate, as the OS gives it
    rows, report = _import(tmp_path, name, src, workers=2)
    assert rows == serial_rows and report == serial
    assert b"caf\xe9.db" in os.listdir(os.fsencode(tmp_path))  # the name's own bytes


@pytest.mark.parametrize("workers", [0, 2])
def test_lines_in_random_id_order_store_what_the_serial_import_stores(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    """Ids in a real file are in no order (uuids): the row path writes each batch sorted by
    id, and every row, conflict and line number must still be the line's own."""
    monkeypatch.setattr(importer, "BATCH", 29)
    monkeypatch.setattr(importer, "ROWS_BATCH", 29)
    lines = _mixed_lines()
    random.Random(11).shuffle(lines)
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(lines))
    serial_rows, serial = _import(tmp_path, "serial", src, workers=0, records=True)
    rows, report = _import(tmp_path, "rows", src, workers=workers)
    assert rows == serial_rows
    assert report == serial
    assert {c["code"] for c in serial["conflicts"]} >= {"DUPLICATE_ID", "ID_EXISTS"}


def test_a_batch_is_bounded_by_its_content_as_well_as_its_rows(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large memories: a batch of ROWS_BATCH rows would hold ROWS_BATCH x 64 KiB; the
    writer is handed a batch once its content reaches ROWS_BATCH_CHARS."""
    monkeypatch.setattr(importer, "ROWS_BATCH_CHARS", 5_000)
    records = list(generate(120, seed=3, anchor=NOW))
    src = tmp_path / "in.jsonl"
    lines = []
    for i, r in enumerate(records):  # every fifth memory is long
        obj = json.loads(r.to_json())
        obj["content"] = obj["content"] + (" and more" * 200 if i % 5 == 0 else "")
        obj["provenance"].pop("content_sha256", None)
        lines.append(json.dumps(obj))
    src.write_text("\n".join(lines) + "\n")
    sizes: list[tuple[int, int]] = []
    real = SqliteStore.insert_rows

    def spy(self: SqliteStore, rows, **kw):  # type: ignore[no-untyped-def]
        sizes.append((len(rows), sum(row_content_chars(row) for row in rows)))
        return real(self, rows, **kw)

    monkeypatch.setattr(SqliteStore, "insert_rows", spy)
    with SqliteStore(tmp_path / "s.db") as store:
        rep = import_file(store, src, now=NOW)
        assert rep.ok and rep.imported == len(records)
    assert len(sizes) > 5 and sum(n for n, _ in sizes) == len(records)
    longest = max(len(json.loads(line)["content"]) for line in lines)
    assert all(chars < 5_000 + longest for _, chars in sizes)


def test_worker_processes_start_for_a_large_file_or_when_asked(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small file imports in this process (starting workers costs ~1 s); a file of
    TURNS_MIN_BYTES or more takes TURN_WORKERS processes on two cores or more; ``workers``
    overrides both ways."""
    started: list[int] = []

    class Counting(import_turns._Pool):
        def __init__(self, count: int, store_path: Path):
            started.append(count)
            super().__init__(count, store_path)

    monkeypatch.setattr(import_turns, "_Pool", Counting)
    monkeypatch.setattr(importer, "BLOCK_BYTES", 4096)  # several blocks, still no process
    src = tmp_path / "in.jsonl"
    src.write_text("".join(r.to_json() + "\n" for r in generate(50, seed=1, anchor=NOW)))
    size = src.stat().st_size

    def run(name: str, workers: int | None = None) -> None:
        with SqliteStore(tmp_path / f"{name}.db") as store:
            assert import_file(store, src, now=NOW, workers=workers).imported == 50

    run("small")
    assert started == []
    monkeypatch.setattr(importer, "TURNS_MIN_BYTES", size)
    run("large")
    cores = len(os.sched_getaffinity(0))
    assert started == ([importer.TURN_WORKERS] if cores >= 2 else [])
    started.clear()
    run("asked-none", workers=0)
    assert started == []
    monkeypatch.setattr(importer, "TURNS_MIN_BYTES", size + 1)
    run("asked", workers=2)
    assert started == [2]


def test_batches_are_bounded_by_rows_and_by_content() -> None:
    """What the workers write a transaction: ``size`` rows or ``max_chars`` of content
    (code points, as a row's len), the batch cut after the row that reaches it."""
    rows = [good(f"id-{n}", content="\u00e9" * (100 if n % 4 else 1000)) for n in range(1, 41)]
    table = rows_table([(n, record_to_row(parse_record_line(json.dumps(r))), False)
                        for n, r in enumerate(rows, 1)])  # fmt: skip
    out = list(import_turns._batches(table, 7, 1500))
    assert [i for b in out for i in b.column("line").to_pylist()] == list(range(1, 41))
    sizes = [[len(c) for c in b.column("content").to_pylist()] for b in out]
    assert all(len(s) <= 7 and sum(s[:-1]) < 1500 for s in sizes)
    assert all(len(s) == 7 or sum(s) >= 1500 for s in sizes[:-1])  # cut no earlier
    assert len(out) > 40 // 7 + 1  # the content bound cut some batches short
    assert [b.num_rows for b in import_turns._batches(table, 7, None)] == [7] * 5 + [5]


def test_the_cli_takes_workers_and_reports_the_same(home: Path, tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(_mixed_lines()))
    out = {}
    for workers in ("0", "2"):
        res = CliRunner().invoke(
            app,
            ["import", str(src), "--store", f"sqlite:///{tmp_path / workers}.db", "--json",
             "--max-line-bytes", str(MAX_LINE), "--workers", workers],
        )  # fmt: skip
        assert res.exit_code == 1  # invalid and skipped lines
        out[workers] = json.loads(res.stdout)
    assert out["2"] == out["0"] and out["0"]["imported"] > 250


def test_no_child_processes_means_parsing_in_process(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*a: object, **kw: object) -> None:
        raise PermissionError("no processes here")

    monkeypatch.setattr("memlife.import_turns.subprocess.Popen", refuse)
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(_mixed_lines()))
    serial_rows, serial = _import(tmp_path, "serial", src, workers=0, records=True)
    assert _import(tmp_path, "refused", src, workers=1) == (serial_rows, serial)


@pytest.mark.parametrize(
    ("point", "mode", "workers"),
    [
        ("import_chunk:6", "raise", 1),  # the 7th block's parse fails
        ("import_chunk:6", "kill", 1),
        ("import_commit:3", "kill", 1),  # killed inside the 4th transaction, rows inserted
        ("import_commit:3", "kill", 2),  # ... with the other worker parsing meanwhile
    ],
)
def test_a_failing_worker_leaves_whole_batches_and_a_rerun_finishes(
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    point: str,
    mode: str,
    workers: int,
) -> None:
    monkeypatch.setattr(importer, "BATCH", 40)
    monkeypatch.setattr(importer, "ROWS_BATCH", 40)  # the SQLite row path's
    monkeypatch.setattr(importer, "BLOCK_BYTES", 8192)
    records = list(generate(600, seed=4, anchor=NOW))
    src = tmp_path / "in.jsonl"
    src.write_text("".join(r.to_json() + "\n" for r in records))
    expected = {record_to_row(r)[0]: record_to_row(r) for r in records}
    monkeypatch.setenv("MEMLIFE_FAULT", point)
    monkeypatch.setenv("MEMLIFE_FAULT_MODE", mode)
    store = SqliteStore(tmp_path / "s.db")
    with pytest.raises(ImportWorkerError, match="running the same import again"):
        import_file(store, src, now=NOW, workers=workers)
    stored = store.connection.execute("SELECT * FROM records").fetchall()
    assert 0 < len(stored) < len(records)
    # whole transactions, written in file order: what is stored is a prefix of the file
    assert {row[0] for row in stored} == {r.id for r in records[: len(stored)]}
    assert all(row == expected[row[0]] for row in stored)  # and each row whole
    monkeypatch.delenv("MEMLIFE_FAULT")
    rep = import_file(store, src, now=NOW, workers=workers)
    assert rep.ok and rep.unchanged == len(stored)
    assert rep.imported + rep.unchanged == len(records)
    final = store.connection.execute("SELECT * FROM records ORDER BY id").fetchall()
    assert final == sorted(expected.values())
    store.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines())
def test_fast_row_is_the_fast_records_row(line: bytes) -> None:
    record = fast_record(line)
    row = fast_row(line)
    assert (row is None) == (record is None)
    if record is not None:
        assert row == record_to_row(record)
        assert [type(v) for v in row] == [type(v) for v in record_to_row(record)]


def test_fast_row_takes_ordinary_records() -> None:
    for r in generate(300, seed=3, anchor=NOW):
        assert fast_row(r.to_json().encode()) == record_to_row(r)


_WORDS = st.sampled_from(
    ["not", "NOT", "Never", "no longer", "don't", "won\u2019t", "n't", "knot", "snow", "quit",
     "\u017ftopped", "\u212a", "\u0130not", "stopped", "unsubscribed", "anymore", "caf\u00e9",
     "_no", "no_", "no1", "\ud800", "nothing", "\u00a0", "\t", ".", "'", "A", "z9"]
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=40), st.lists(_WORDS, max_size=8).map(" ".join)))
def test_the_fast_text_signals_are_the_regex_ones(value: str) -> None:
    assert text.negates(value) == (text._NEGATION.search(value) is not None)
    folded = text.normalise(value)  # a text that folds to nothing is keyed by itself
    key = folded.encode() if folded else value.encode("utf-8", "surrogatepass")
    assert text.norm_sha256(value) == hashlib.sha256(key).hexdigest()


def _two(lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.integers(lo, hi).map(lambda i: f"{i:02d}")


_FRACTION = st.integers(1, 6).flatmap(
    lambda k: st.integers(0, 10**k - 1).map(lambda v: "." + str(v).zfill(k))
)
_ZONE = st.one_of(
    st.just("Z"), st.builds("{}{}:{}".format, st.sampled_from("+-"), _two(0, 23), _two(0, 59))
)
_PLAIN_TIME = st.builds(
    "{:04d}-{}-{}T{}:{}:{}{}{}".format,
    st.one_of(st.integers(0, 9999), st.sampled_from([0, 1, 1970, 9999])),
    _two(1, 12),
    _two(1, 31),
    _two(0, 23),
    _two(0, 59),
    _two(0, 59),
    st.one_of(st.just(""), _FRACTION),
    _ZONE,
)


@settings(max_examples=400, deadline=None)
@given(_PLAIN_TIME, st.sampled_from(["created_at", "expires_at", "last_verified_at"]))
def test_the_fast_paths_time_shape_agrees_with_the_model(value: str, name: str) -> None:
    """Times of the shape the fast path parses itself (datetime.fromisoformat): what it
    takes is the checked path's value, and what it declines the checked path refuses
    (Feb 30, year 0, past datetime.max once in UTC), so no valid shape is slowed down."""
    line = json.dumps({**good("m-1"), name: value}).encode()
    record = fast_record(line)
    if record is None:
        with pytest.raises(RecordError):
            parse_record_line(line.decode())
    else:
        assert record == parse_record_line(line.decode())
        assert fast_row(line) == record_to_row(record)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")), max_size=40),
    st.integers(8, 64),
    st.integers(4, 40),
    st.booleans(),
)
def test_each_span_is_the_bytes_at_its_offset(
    lines: list[bytes], block: int, bound: int, last_newline: bool
) -> None:
    """Workers read their blocks from the file by offset: every block line_spans yields
    must be exactly the file's bytes there, also after an over-long line is drained."""
    import io

    data = b"\n".join(lines) + (b"\n" if last_newline and lines else b"")
    for item in importer.line_spans(io.BytesIO(data), bound, block):
        if isinstance(item, int):
            continue
        first_line, offset, chunk = item
        assert data[offset : offset + len(chunk)] == chunk
        assert first_line == data.count(b"\n", 0, offset) + 1


def test_a_worker_that_cannot_open_the_store_stops_the_import_with_nothing_written(
    home: Path, tmp_path: Path
) -> None:
    """The store file made unreadable for the workers (a directory where they expect it):
    the import stops with the worker's reason, and nothing is half done."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(r.to_json() + "\n" for r in generate(30, seed=2, anchor=NOW)))
    with SqliteStore(tmp_path / "s.db") as store:
        real = store.path
        store.path = tmp_path / "not-a-file"  # what the workers are told to open
        store.path.mkdir()
        with pytest.raises(ImportWorkerError, match="unable to open database file"):
            import_file(store, src, now=NOW, workers=2)
        store.path = real
        assert store.connection.execute("SELECT count(*) FROM records").fetchone() == (0,)


def test_an_io_error_during_the_import_is_raised_not_retried_in_process(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a worker that cannot start sends the import to the in-process path; an I/O
    error once workers run is the caller's to see (a second pass would report the first
    pass's rows as unchanged)."""
    src = tmp_path / "in.jsonl"
    src.write_text("".join(r.to_json() + "\n" for r in generate(20, seed=5, anchor=NOW)))

    def broken(*a: object, **kw: object) -> None:
        raise OSError("the disk went away")

    monkeypatch.setattr(importer, "import_in_turns", broken)
    with SqliteStore(tmp_path / "s.db") as store, pytest.raises(OSError, match="disk"):
        import_file(store, src, now=NOW, workers=2)


def test_a_file_cut_short_under_the_import_stops_it_and_is_not_misread(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers read their blocks by offset after the importing process found them: a file
    truncated in between must stop the import (a short read), never parse other bytes."""
    monkeypatch.setattr(importer, "BLOCK_BYTES", 4096)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(r.to_json() + "\n" for r in generate(80, seed=6, anchor=NOW)))
    real = importer.line_spans

    def cut_after_first(*a: Any, **kw: Any) -> Any:
        for i, item in enumerate(real(*a, **kw)):
            yield item
            if i == 0:
                src.write_bytes(b"")  # another process truncates the file

    monkeypatch.setattr(importer, "line_spans", cut_after_first)
    with SqliteStore(tmp_path / "s.db") as store:
        with pytest.raises(ImportWorkerError, match="expected .* bytes at offset 0"):
            import_file(store, src, now=NOW, workers=1)
        assert store.connection.execute("SELECT count(*) FROM records").fetchone() == (0,)
