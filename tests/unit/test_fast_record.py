"""The import's fast path (memlife/fast_record.py) never diverges from the checked path.

Whatever line the fast path accepts, the checked path (``model.parse_record_line``) accepts
too and builds the same record: same values, same JSON, same fields set, same store row.
Lines the fast path declines go to the checked path, which names the error; so a fast path
that let through a value the model refuses, or changed one, fails here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from memlife.demo import generate
from memlife.errors import RecordError
from memlife.fast_record import _RecordDict, fast_record
from memlife.importer import import_file
from memlife.model import MemoryRecord, parse_record_line
from memlife.stores.sqlite import SqliteStore, record_to_row

ANCHOR = datetime(2026, 6, 1, tzinfo=UTC)

_TIMES = st.one_of(
    st.sampled_from(
        [
            "2025-01-02T10:00:00Z",
            "2025-01-02T10:00:00.123456+05:30",
            "2025-01-02T10:00:00-23:59",
            "2025-01-02T10:00:00",  # naive: refused
            "2025-01-02",
            "2025-01-02 10:00:00Z",
            "2025-01-02t10:00:00z",
            "9999-12-31T23:59:59-05:00",  # past datetime.max once in UTC
            "0001-01-01T00:30:00+01:00",  # before datetime.min once in UTC
            "2025-02-30T10:00:00Z",
            "2025-01-02T23:59:60Z",
            "2025-01-02T10:00:00.1234567891Z",
            "",
            "1700000000",  # a number as text: refused on both paths, never epoch seconds
            " 1700000000.5 ",
            "1.7e9",
        ]
    ),
    st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()),
    st.integers(),
    st.none(),
)
_TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", " ", "\t\n", "a" * 257, "x", "u-1", "caf\u00e9", "\u2028"]),
)
_NAMESPACES = st.one_of(
    st.sampled_from(
        [
            "/users/u-1/facts",
            "/users/u-1/",
            "/users//facts",
            "/users/../facts",
            "/users/./facts",
            "/users/u\x01/facts",
            "/users/u\x7f/facts",
            " ",
            "",
            "/" + "a" * 1024,
            "relative/path",
        ]
    ),
    st.lists(st.sampled_from(["a", "b", ".", "..", "", "\x00", " "]), min_size=1, max_size=4).map(
        "/".join
    ),
)


def _enum(values: list[str]) -> st.SearchStrategy:
    return st.one_of(st.sampled_from([*values, "Active", "", "unknown"]), st.integers(), st.none())


_FIELDS: dict[str, st.SearchStrategy] = {
    "id": _TEXT,
    "actor_id": _TEXT,
    "namespace": _NAMESPACES,
    "memory_type": _enum(["episodic", "semantic", "procedural"]),
    "content": _TEXT,
    "created_at": _TIMES,
    "subject": st.one_of(_TEXT, st.none(), st.integers()),
    "owner": st.one_of(_TEXT, st.none()),
    "confidence": st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-2, 2),
        st.booleans(),
        st.sampled_from(["0.5", None]),
    ),
    "source": _enum(["system_of_record", "user_stated", "user_confirmed", "agent_inferred"]),
    "last_accessed_at": _TIMES,
    "access_count": st.one_of(
        st.integers(-5, 5),
        st.sampled_from([2**63 - 1, 2**63, 10**30, 1.0, True, "3", None]),
    ),
    "last_verified_at": _TIMES,
    "expires_at": _TIMES,
    "retention_class": _enum(["standard", "sensitive", "legal_hold"]),
    "status": _enum(["active", "superseded", "pending_delete", "retained", "quarantined"]),
    "status_changed_at": _TIMES,
    "provenance": st.one_of(
        st.none(),
        st.lists(st.integers(), max_size=1),
        st.fixed_dictionaries(
            {},
            optional={
                "source_event": st.one_of(_TEXT, st.none()),
                "policy_version": st.one_of(_TEXT, st.none(), st.integers()),
                "replaced_by": st.one_of(st.sampled_from(["m-2", "", None]), st.integers()),
                "supersedes": st.one_of(st.lists(st.sampled_from(["m-1", "m-2", 3])), st.none()),
                "content_sha256": st.one_of(st.none(), st.sampled_from(["ab" * 32, ""])),
                "extra": st.integers(),
            },
        ),
    ),
    "unknown_field": st.integers(),
}
_VALID = {
    "id": "m-1",
    "actor_id": "u-1",
    "namespace": "/users/u-1/facts",
    "memory_type": "semantic",
    "content": "Drinks only green tea.",
    "created_at": "2025-01-02T10:00:00Z",
}


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    """A JSON line near the contract: a valid core, some fields replaced or dropped."""
    record: dict = dict(_VALID)
    for name in draw(st.lists(st.sampled_from(sorted(_FIELDS)), max_size=6, unique=True)):
        record[name] = draw(_FIELDS[name])
    for name in draw(st.lists(st.sampled_from(sorted(_VALID)), max_size=2, unique=True)):
        record.pop(name, None)
    text = json.dumps(record, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()) and len(text) > 2:  # a duplicate key: the last one counts
        dup = draw(st.sampled_from(sorted(_FIELDS)))
        text = "{" + json.dumps(dup) + ": " + json.dumps(draw(_FIELDS[dup])) + ", " + text[1:]
    return text.encode("utf-8", "surrogatepass")


def _assert_same(line: bytes) -> bool:
    """True when the fast path took the line; then the checked path must agree exactly."""
    fast = fast_record(line)
    if fast is None:
        return False
    checked = parse_record_line(line.decode("utf-8"), 1)  # must not raise RecordError
    assert fast == checked
    assert fast.to_json() == checked.to_json()
    assert fast.model_fields_set == checked.model_fields_set
    assert fast.provenance.model_fields_set == checked.provenance.model_fields_set
    assert record_to_row(fast) == record_to_row(checked)
    assert [type(v) for v in fast.__dict__.values()] == [
        type(checked.__dict__[k]) for k in fast.__dict__
    ]
    return True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines())
def test_a_line_the_fast_path_takes_is_the_checked_paths_record(line: bytes) -> None:
    _assert_same(line)


def test_the_fast_path_takes_ordinary_records_and_declines_bad_ones() -> None:
    taken = [_assert_same(r.to_json().encode()) for r in generate(300, seed=3, anchor=ANCHOR)]
    assert all(taken)  # otherwise the import silently runs at the checked path's speed
    bad = [
        {**_VALID, "content": "   "},
        {**_VALID, "namespace": "/users/../x"},
        {**_VALID, "status": "superseded"},
        {**_VALID, "created_at": "2025-01-02T10:00:00"},
        {**_VALID, "created_at": "9999-12-31T23:59:59-05:00"},
        {**_VALID, "confidence": True},
        {**_VALID, "extra": 1},
    ]
    for record in bad:
        assert fast_record(json.dumps(record).encode()) is None
        try:
            parse_record_line(json.dumps(record), 1)
        except RecordError:
            continue
        raise AssertionError(f"the checked path accepted {record}")


def test_the_fast_schema_names_the_models_fields_and_required_ones() -> None:
    fields = TypeAdapter(_RecordDict).core_schema["fields"]
    assert list(fields) == list(MemoryRecord.model_fields)
    required = {n for n, f in MemoryRecord.model_fields.items() if f.is_required()}
    assert {n for n, f in fields.items() if f["required"]} == required


def test_import_through_either_path_stores_the_same_rows(home, tmp_path, monkeypatch) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(r.to_json() + "\n" for r in generate(200, seed=5, anchor=ANCHOR)))

    def rows(db_name: str) -> list[tuple]:
        store = SqliteStore(tmp_path / db_name)
        try:
            rep = import_file(store, src, now=ANCHOR)
            assert rep.imported == 200 and rep.ok
            return store.connection.execute("SELECT * FROM records ORDER BY id").fetchall()
        finally:
            store.close()

    fast_rows = rows("fast.db")  # a SQLite store: rows, built by the columnar path
    monkeypatch.setattr("memlife.importer.ROWS_PATH", False)  # records, line by line
    assert rows("records.db") == fast_rows
    monkeypatch.setattr("memlife.importer.fast_record", lambda raw: None)  # checked path only
    assert rows("checked.db") == fast_rows
