"""Guards left untested by the thirty-third audit (session 38): the import's fast path
(memlife/fast_record.py) held against the checked path row for row, and memlife/sql_in.py
at its chunk edges.

``test_fast_record`` compares ``fast_record`` with the checked path; the row builder
``fast_row`` (what a SQLite import actually stores) was only compared with the columnar
path, never with the checked path, so a guard dropped from ``fast_row`` alone went
unnoticed. Here both are differentially tested on generated lines spelled the way hostile
files spell them (escapes, whitespace, key order, number spellings, duplicate keys).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlife.errors import RecordError
from memlife.fast_record import fast_record, fast_row
from memlife.import_lines import check_declared_sha256, line_row
from memlife.importer import import_file
from memlife.model import MemoryRecord, parse_record_line
from memlife.sql_in import CHUNK, in_chunks, marks
from memlife.stores.sqlite import SqliteStore, record_to_row

ANCHOR = datetime(2026, 6, 1, tzinfo=UTC)
_VALID: dict[str, Any] = {
    "id": "m-1",
    "actor_id": "u-1",
    "namespace": "/users/u-1/facts",
    "memory_type": "semantic",
    "content": "x",
    "created_at": "2025-01-02T10:00:00Z",
}
_SHA_X = hashlib.sha256(b"x").hexdigest()


def _line(**fields: Any) -> bytes:
    return json.dumps({**_VALID, **fields}).encode()


def _checked(line: bytes) -> MemoryRecord | None:
    """The checked path's verdict on a line, as the import takes it (declared hash included)."""
    try:
        record = parse_record_line(line.decode("utf-8"), 1)
        check_declared_sha256(record, 1)
    except (RecordError, UnicodeDecodeError):
        return None
    return record


def _same_or_declined(line: bytes) -> bool:
    """True when the fast path took the line: then its record AND its row are the checked
    path's, value for value and type for type."""
    fast, row = fast_record(line), fast_row(line)
    assert (fast is None) == (row is None), line
    if row is None:
        return False
    checked = _checked(line)
    assert checked is not None, line  # the fast path took a line the checked path refuses
    assert fast == checked and fast is not None and fast.to_json() == checked.to_json(), line
    expected = record_to_row(checked)
    assert row == expected, line
    assert [type(v) for v in row] == [type(v) for v in expected], line
    return True


# --- generated lines, spelled as hostile files spell them -------------------------------

_WS = st.sampled_from(["", " ", "\t", "\r\n", "  "])


@st.composite
def _json_string(draw: st.DrawFn, text: str) -> str:
    out = ['"']
    for ch in text:
        escape = draw(st.integers(0, 4)) == 0
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) > 0xFFFF and escape:
            v = ord(ch) - 0x10000
            out.append(f"\\u{0xD800 + (v >> 10):04x}\\u{0xDC00 + (v & 0x3FF):04x}")
        elif ord(ch) < 0x20 or escape:
            out.append(("\\u%04x" if draw(st.booleans()) else "\\u%04X") % ord(ch))
        else:
            out.append(ch)
    return "".join(out) + '"'


@st.composite
def _json(draw: st.DrawFn, value: Any) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, str):
        return draw(_json_string(value))
    if isinstance(value, int):
        return draw(st.sampled_from([str(value), f"{value}.0", f"{value}e0", f"{value}E+0"]))
    if isinstance(value, float):
        return draw(st.sampled_from([repr(value), f"{value:.17g}", f"{value:.25e}"]))
    if isinstance(value, list):
        return "[" + ",".join(draw(_json(v)) for v in value) + "]"
    items = list(value.items())
    if draw(st.booleans()):
        items = draw(st.permutations(items))
    return (
        "{"
        + ",".join(
            draw(_WS) + draw(_json_string(k)) + draw(_WS) + ":" + draw(_WS) + draw(_json(v))
            for k, v in items
        )
        + "}"
    )


_TIMES = st.one_of(
    st.sampled_from(
        [
            "2025-01-02T10:00:00Z",
            "2025-01-02T10:00:00z",
            "2025-01-02T10:00:00.000001+14:00",
            "2025-01-02T10:00:00.1234567Z",
            "2025-12-31T23:59:60Z",
            "2024-02-29T00:00:00-00:00",
            "2025-02-29T00:00:00Z",
            "2025-01-02T10:00:00+0530",
            "2025-01-02T10:00:00",
            "2025-01-02T24:00:00Z",
            "0001-01-01T00:00:00+00:01",
            "9999-12-31T23:59:59-00:01",
            "1700000000",
        ]
    ),
    st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat().replace("+00:00", "Z")),
    st.none(),
)
_TEXT = st.one_of(
    st.text(max_size=5),
    st.sampled_from(["x", "u-1", " ", "\u00a0", "\u200b", "\ufeff", "\x00", "\x7f", "\u0085"]),
)
_NS = st.one_of(
    st.sampled_from(["/a", "/a/", "a/b", "/a//b", "/a/../b", "/\u00a0", "/a\x00", "/\u2028"]),
    st.lists(_TEXT, min_size=1, max_size=3).map(lambda p: "/" + "/".join(p)),
)


def _enum(values: list[str]) -> st.SearchStrategy[Any]:
    return st.one_of(st.sampled_from([*values, "", "Active"]), st.none(), st.integers(0, 1))


_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "id": _TEXT,
    "actor_id": _TEXT,
    "namespace": _NS,
    "memory_type": _enum(["episodic", "semantic", "procedural"]),
    "content": _TEXT,
    "created_at": _TIMES,
    "subject": st.one_of(_TEXT, st.none()),
    "owner": st.one_of(_TEXT, st.none()),
    "confidence": st.one_of(st.floats(), st.integers(-1, 2), st.booleans(), st.none()),
    "source": _enum(["system_of_record", "user_stated", "user_confirmed", "agent_inferred"]),
    "last_accessed_at": _TIMES,
    "access_count": st.one_of(st.integers(-2, 3), st.sampled_from([2**63 - 1, 2**63, True])),
    "last_verified_at": _TIMES,
    "expires_at": _TIMES,
    "retention_class": _enum(["standard", "sensitive", "legal_hold"]),
    "status": _enum(["active", "superseded", "pending_delete", "retained", "quarantined"]),
    "status_changed_at": _TIMES,
    "provenance": st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {},
            optional={
                "source_event": st.one_of(_TEXT, st.none()),
                "policy_version": st.one_of(_TEXT, st.none()),
                "replaced_by": st.one_of(st.sampled_from(["m-2", ""]), st.none()),
                "supersedes": st.one_of(st.lists(_TEXT, max_size=2), st.none()),
                "content_sha256": st.sampled_from([None, "", _SHA_X, _SHA_X.upper(), "ab" * 32]),
                "x": st.just({"y": [1]}),
            },
        ),
    ),
    "extra": st.just({"nested": {"a": 1}}),
}


@st.composite
def _lines(draw: st.DrawFn) -> bytes:
    record = dict(_VALID)
    for name in draw(st.lists(st.sampled_from(sorted(_FIELDS)), max_size=6, unique=True)):
        record[name] = draw(_FIELDS[name])
    for name in draw(st.lists(st.sampled_from(sorted(_VALID)), max_size=1, unique=True)):
        record.pop(name, None)
    text = draw(_WS) + draw(_json(record)) + draw(_WS)
    if draw(st.integers(0, 5)) == 0:  # a key written twice, maybe spelled with escapes
        dup = draw(st.sampled_from(sorted(_FIELDS)))
        first = draw(_json_string(dup)) + ":" + draw(_json(draw(_FIELDS[dup]))) + ","
        text = text.replace("{", "{" + first, 1)
    return text.encode("utf-8", "surrogatepass")


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(_lines())
def test_a_row_the_fast_path_builds_is_the_checked_paths_row(line: bytes) -> None:
    """Attacks every acceptance guard of `memlife/fast_record.py::fast_row` (strip, plain
    keys, namespace, zone conversion, supersede, declared hash, repeated keys) against the
    checked path: the row a SQLite import stores is ``record_to_row`` of the checked record."""
    _same_or_declined(line)


# --- fast_row guards, one line each ------------------------------------------------------

_PINNED = [
    # (line, does the checked path take it)
    (_line(status="superseded"), False),
    (_line(status="superseded", provenance={"replaced_by": "m-2"}), True),
    (_line(provenance={"content_sha256": "ab" * 32}), False),
    (_line(provenance={"content_sha256": _SHA_X}), True),
    (_line(content="\u0085"), False),
    (_line(namespace="/users/../facts"), False),
    (_line(namespace="users/u-1"), False),
    (_line(id="m\u00a01"), False),
    (_line(actor_id="u\u200b1"), False),
    (_line(actor_id="u\x7f1"), False),  # ASCII, not printable
    (_line(id="m\u31641"), False),  # printable, not ASCII: a Hangul filler
    (_line(created_at="2025-01-02T10:00:00+05:30"), True),
    (_line(expires_at="9999-12-31T23:59:59-00:01"), False),
    (_line(expires_at="2025-02-29T00:00:00Z"), False),
    (_line(last_verified_at="2025-01-02T10:00:00.1234567Z"), False),  # 7 digits: cut
    (_line(confidence=1.0000000000000002), False),
    (_line(confidence=-5e-324), False),
    (_line(confidence=-0.0, access_count=2**63 - 1), True),
    (_line(access_count=2**63), False),
    (_line(id="m" * 257), False),
    (_line(actor_id="u" * 257), False),
    (_line(id="m" * 256, actor_id="u" * 256, namespace="/" + "n" * 1023), True),
    (_line(namespace="/" + "n" * 1024), False),
    (_line(confidence=1), True),
    (_line(access_count=1.0), False),
    (_line(subject=1), False),
    (b'{"provenance":{"supersedes":["a"]},' + _line()[1:], True),
    (
        _line(
            provenance={
                "supersedes": ["a"],
                "source_event": None,
                "policy_version": None,
                "replaced_by": None,
                "content_sha256": None,
            }
        ),
        True,
    ),
    (_line(retention_class="legal_hold")[:-1] + b', "retention_class": "standard"}', False),
    (_line(retention_class="legal_hold")[:-1] + b', "\\u0072etention_class": "standard"}', False),
    (_line(provenance={"replaced_by": "m-2"})[:-2] + b', "replaced_by": "m-3"}}', False),
]


@pytest.mark.parametrize("line,taken", _PINNED)
def test_fast_row_declines_what_the_checked_path_refuses(line: bytes, taken: bool) -> None:
    """Attacks the guards of `memlife/fast_record.py::fast_row` one by one (the superseded
    check, the declared-hash check, ``content.strip()``, ``_namespace_ok``, ``_plain_key``,
    ``astimezone(UTC)``, the ValueError/OverflowError catch, the provenance key-order
    shortcut, ``_may_repeat_a_key``): each line is either the checked path's row or declined."""
    assert (_checked(line) is not None) is taken
    assert _same_or_declined(line) is taken


def test_line_row_refuses_a_deep_line_without_escapes_naming_it() -> None:
    """Attacks the depth check in `memlife/import_lines.py::checked_text` as ``line_row``
    reaches it: a deeply nested line is a RecordError on '<json>', not a crash."""
    deep = b'{"id":"m-2","x":' + b"[" * 1100 + b"]" * 1100 + b"}\n"
    with pytest.raises(RecordError) as err:
        line_row(deep, 7, content_max=1 << 20)
    assert err.value.field == "<json>" and err.value.line == 7


def test_a_deep_line_with_an_escape_is_one_invalid_line_not_a_crashed_import(
    tmp_path: Path,
) -> None:
    """Attacks `memlife/fast_record.py::_may_repeat_a_key` -> `memlife/model.py::repeats_a_key`
    (which catches ValueError only) ahead of `memlife/import_lines.py::checked_text`: a 2 KB
    line is one invalid line; the good line before it is still imported (a real bug the audit
    found: the whole import raised RecursionError; fixed in session 38)."""
    src = tmp_path / "in.jsonl"
    deep = b'{"id":"m-\\u0032","x":' + b"[" * 1100 + b"]" * 1100 + b"}\n"
    src.write_bytes(_line() + b"\n" + deep)
    store = SqliteStore(tmp_path / "s.db")
    try:
        report = import_file(store, src, now=ANCHOR, workers=0)
    finally:
        store.close()
    assert report.imported == 1
    assert [(e.line, e.field) for e in report.invalid] == [(2, "<json>")]


# --- sql_in at its edges ------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 1])
def test_in_chunks_asks_every_key_at_each_chunk_edge(n: int) -> None:
    """Attacks ``range(0, len(keys), size)`` and the slice in `memlife/sql_in.py::in_chunks`:
    a list one past a chunk (a single key included) loses no key and asks none twice."""
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    keys = [f"k{i}" for i in range(n)]
    con.executemany("INSERT INTO t VALUES (?)", [(k,) for k in keys])
    found: list[str] = []
    for qs, chunk in in_chunks(keys):
        assert 0 < len(chunk) <= CHUNK and qs.count("?") == len(chunk)
        found += [r[0] for r in con.execute(f"SELECT k FROM t WHERE k IN ({qs})", chunk)]
    assert sorted(found) == sorted(keys)


def test_store_get_many_of_one_key_one_past_a_chunk(tmp_path: Path) -> None:
    """Attacks `memlife/sql_in.py::in_chunks` through `SqliteStore.get_many`: the key at
    index CHUNK (and a lone key) is found."""
    store = SqliteStore(tmp_path / "s.db")
    try:
        records = [
            MemoryRecord.model_validate_json(_line(id=f"r{i:04d}", content=f"c{i}"))
            for i in range(CHUNK + 1)
        ]
        store.put_many(records)
        assert set(store.get_many([r.id for r in records])) == {r.id for r in records}
        assert set(store.get_many(["r0000"])) == {"r0000"}
    finally:
        store.close()


def test_marks_of_no_keys_is_an_empty_in_list_sqlite_runs() -> None:
    """Attacks `memlife/sql_in.py::marks` at n=0 (``ReviewQueue.list([])`` and friends build
    ``IN ()`` from it): no placeholder, and SQLite answers nothing rather than failing."""
    assert marks(0) == "" and marks(1) == "?"
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (k TEXT)")
    con.execute("INSERT INTO t VALUES ('a')")
    assert con.execute(f"SELECT k FROM t WHERE k IN ({marks(0)})", []).fetchall() == []


def test_line_row_bounds_content_in_utf8_bytes_at_the_limit() -> None:
    """Attacks ``size > content_max`` and the ``len(content) * 4`` pre-check in
    `memlife/import_lines.py::line_row`: 40 bytes of 4-byte characters pass a 40-byte
    limit and fail a 39-byte one, on the fast path and on the checked path alike."""
    for content in ("\U0001f600" * 10, "\\ud83d\\ude00" * 10):
        line = b'{"id":"m-1","actor_id":"u-1","namespace":"/a","memory_type":"semantic",'
        line += f'"content":"{content}","created_at":"2025-01-02T10:00:00Z"}}\n'.encode()
        assert line_row(line, 3, content_max=40)[5] == "\U0001f600" * 10
        with pytest.raises(RecordError) as err:
            line_row(line, 3, content_max=39)
        assert err.value.field == "content" and err.value.line == 3
    ascii_line = _line(content="x" * 40)  # 40 chars: past the pre-check, exactly 40 bytes
    assert line_row(ascii_line, 3, content_max=40)[5] == "x" * 40
    with pytest.raises(RecordError):
        line_row(ascii_line, 3, content_max=39)


def test_line_row_refuses_a_declared_hash_of_another_content() -> None:
    """Attacks the ``check_declared_sha256`` call in `memlife/import_lines.py::line_row`:
    a line declaring another content's hash is refused, never stored with a fixed hash."""
    with pytest.raises(RecordError) as err:
        line_row(_line(provenance={"content_sha256": "ab" * 32}), 4, content_max=1 << 20)
    assert err.value.field == "provenance.content_sha256"
