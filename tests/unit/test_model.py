"""The record contract: validation errors name the record id and the field."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memlife.model import (
    MemoryRecord,
    MemoryType,
    RecordError,
    RetentionClass,
    Status,
    content_sha256,
    parse_record,
    parse_record_line,
    parse_time,
    plan_view,
)
from tests.support.records import good

GOOD = good("m-0001", content="Drinks only green tea, never coffee.")


def with_(**changes: object) -> dict:
    d = json.loads(json.dumps(GOOD))
    for k, v in changes.items():
        if v is _DROP:
            d.pop(k)
        else:
            d[k] = v
    return d


_DROP = object()


def test_design_example_parses() -> None:
    r = parse_record_line(json.dumps(GOOD), 1)
    assert r.id == "m-0001"
    assert r.memory_type is MemoryType.semantic
    assert r.created_at == datetime(2026, 1, 2, 10, tzinfo=UTC)
    assert r.retention_class is RetentionClass.standard
    assert r.status is Status.active
    assert r.provenance.source_event == "evt-17"
    assert r.sha256 == content_sha256(GOOD["content"])


# (case name, record, field named in the error, record id named in the error)
BAD = [
    ("missing id", with_(id=_DROP), "id", None),
    ("empty id", with_(id=""), "id", ""),
    ("id of wrong type", with_(id=17), "id", None),
    ("missing actor", with_(actor_id=_DROP), "actor_id", "m-0001"),
    ("missing created_at", with_(created_at=_DROP), "created_at", "m-0001"),
    ("unknown memory_type", with_(memory_type="semantik"), "memory_type", "m-0001"),
    ("memory_type wrong case", with_(memory_type="Semantic"), "memory_type", "m-0001"),
    ("confidence above 1", with_(confidence=1.5), "confidence", "m-0001"),
    ("confidence below 0", with_(confidence=-0.01), "confidence", "m-0001"),
    ("confidence not a number", with_(confidence="high"), "confidence", "m-0001"),
    ("unparseable timestamp", with_(created_at="yesterday"), "created_at", "m-0001"),
    ("naive created_at", with_(created_at="2026-01-02T10:00:00"), "created_at", "m-0001"),
    ("naive expires_at", with_(expires_at="2026-03-01T00:00:00"), "expires_at", "m-0001"),
    (
        "naive last_verified_at",
        with_(last_verified_at="2026-03-01 00:00"),
        "last_verified_at",
        "m-0001",
    ),
    ("date without time", with_(last_accessed_at="2026-03-01"), "last_accessed_at", "m-0001"),
    ("unknown status", with_(status="deleted"), "status", "m-0001"),
    ("unknown source", with_(source="rumour"), "source", "m-0001"),
    ("unknown retention class", with_(retention_class="forever"), "retention_class", "m-0001"),
    ("access_count wrong type", with_(access_count="many"), "access_count", "m-0001"),
    ("access_count fractional", with_(access_count=1.5), "access_count", "m-0001"),
    ("access_count negative", with_(access_count=-1), "access_count", "m-0001"),
    ("content wrong type", with_(content=42), "content", "m-0001"),
    ("content list", with_(content=["a"]), "content", "m-0001"),
    ("empty content", with_(content=""), "content", "m-0001"),
    ("blank content", with_(content="   \n"), "content", "m-0001"),
    ("unknown top-level key", with_(colour="blue"), "colour", "m-0001"),
    ("unknown provenance key", with_(provenance={"origin": "x"}), "provenance.origin", "m-0001"),
    (
        "supersedes not a list",
        with_(provenance={"supersedes": "m-2"}),
        "provenance.supersedes",
        "m-0001",
    ),
]


@pytest.mark.parametrize(("record", "field", "rid"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_invalid_record_names_id_and_field(record: dict, field: str, rid: str | None) -> None:
    with pytest.raises(RecordError) as info:
        parse_record_line(json.dumps(record), 12)
    err = info.value
    assert err.field == field
    assert err.record_id == rid
    assert err.line == 12
    assert err.reason
    msg = str(err)
    assert f"'{field}'" in msg
    assert "line 12" in msg
    assert (rid or "<no id>") in msg
    assert err.as_dict() == {"line": 12, "id": rid, "field": field, "reason": err.reason}


@pytest.mark.parametrize(
    "text",
    ['{"id": "m-0001", "actor_id": ', "not json", "{'id': 'm-1'}", "", '{"id": "m-1",}'],
    ids=["truncated", "bare word", "single quotes", "empty", "trailing comma"],
)
def test_malformed_json(text: str) -> None:
    with pytest.raises(RecordError) as info:
        parse_record_line(text, 3)
    assert info.value.field == "<json>"
    assert info.value.line == 3
    assert "malformed JSON" in info.value.reason


@pytest.mark.parametrize("text", ["[1, 2]", '"m-1"', "null", "17"])
def test_json_that_is_not_an_object(text: str) -> None:
    with pytest.raises(RecordError) as info:
        parse_record_line(text, 4)
    assert info.value.field == "<record>"
    assert info.value.record_id is None


def test_first_bad_field_is_reported_even_with_several() -> None:
    with pytest.raises(RecordError) as info:
        parse_record(with_(memory_type="x", status="y"))
    assert info.value.field in {"memory_type", "status"}
    assert info.value.record_id == "m-0001"


def test_timestamps_normalised_to_utc() -> None:
    r = parse_record(with_(created_at="2026-01-02T12:00:00+02:00"))
    assert r.created_at == datetime(2026, 1, 2, 10, tzinfo=UTC)
    assert r.created_at.utcoffset().total_seconds() == 0


def test_parse_time() -> None:
    assert parse_time("2026-01-02T10:00:00Z") == datetime(2026, 1, 2, 10, tzinfo=UTC)
    assert parse_time("2026-01-02T11:00:00+01:00") == datetime(2026, 1, 2, 10, tzinfo=UTC)
    with pytest.raises(ValueError, match="no timezone"):
        parse_time("2026-01-02T10:00:00")
    with pytest.raises(ValueError):
        parse_time("tomorrow")


def test_json_round_trip_is_lossless() -> None:
    r = parse_record(with_(expires_at="2027-01-01T00:00:00Z", retention_class="legal_hold"))
    again = parse_record_line(r.to_json())
    assert again == r
    assert json.loads(again.to_json()) == json.loads(r.to_json())


def test_plan_view_carries_no_content() -> None:
    r = parse_record(GOOD)
    v = plan_view(r)
    assert GOOD["content"] not in repr(v)
    assert v.content_sha256 == content_sha256(GOOD["content"])
    assert v.created == r.created_at.timestamp()
    assert v.negated is True  # "never coffee"
    assert plan_view(parse_record(with_(content="Drinks green tea."))).negated is False


def test_record_error_is_a_value_error() -> None:
    assert issubclass(RecordError, ValueError)
    assert isinstance(MemoryRecord.model_fields, dict)


# -- strictness of the JSON contract: no silent coercion of wrong types ----------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("confidence", True),
        ("access_count", True),
        ("access_count", "5"),
        ("created_at", 1767348000),
        ("created_at", "1767348000"),
        ("expires_at", " 1767348000.5 "),
        ("last_accessed_at", "1.7e9"),
    ],
    ids=[
        "confidence-bool",
        "access_count-bool",
        "access_count-string",
        "created_at-epoch-int",
        "created_at-epoch-text",
        "expires_at-epoch-text",
        "last_accessed_at-exponent-text",
    ],
)
def test_wrong_json_types_are_not_coerced(field: str, value: object) -> None:
    with pytest.raises(RecordError) as info:
        parse_record(with_(**{field: value}))
    assert info.value.field == field


def test_superseded_requires_replaced_by() -> None:
    with pytest.raises(RecordError) as info:
        parse_record(with_(status="superseded"))
    assert "replaced_by" in info.value.field or "replaced_by" in info.value.reason


@pytest.mark.parametrize("retention", list(RetentionClass))
@pytest.mark.parametrize("status", list(Status))
def test_held_is_legal_hold_or_retained_and_nothing_else(
    retention: RetentionClass, status: Status
) -> None:
    """Invariant 1 is decided in one place (every writer asks ``record.held``): each
    retention class against each status."""
    fields = {"retention_class": retention.value, "status": status.value}
    record = parse_record_line(json.dumps(good("m-h", provenance={"replaced_by": "m-r"}, **fields)))
    expected = retention is RetentionClass.legal_hold or status is Status.retained
    assert record.held is expected
