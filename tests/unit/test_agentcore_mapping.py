"""The AgentCore field map against the record model and AgentCore's budgets.

These used to be import-time checks in the store module; as tests they fail in CI, by
name, instead of breaking every import of memlife.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memlife.errors import CorruptRecordError
from memlife.model import MemoryRecord, Provenance, parse_time
from memlife.stores.agentcore.mapping import (
    FIELD_MAP,
    INDEXED_KEYS,
    MAX_INDEXED_KEYS,
    MAX_METADATA_KEYS,
    META_KEYS,
    PLACED_ELSEWHERE,
    decode_metadata,
    decode_record,
    encode_metadata,
    invalid_reason,
    iso,
)


def test_metadata_keys_fit_agentcore_budget() -> None:
    # The budget is full: a new record field must be sidecar-only (key None).
    assert len(META_KEYS) <= MAX_METADATA_KEYS
    assert len(set(META_KEYS)) == len(META_KEYS), "two fields share a metadata key"


def test_indexed_keys_fit_agentcore_budget() -> None:
    assert len(INDEXED_KEYS) <= MAX_INDEXED_KEYS


def test_every_model_field_has_a_place() -> None:
    """A field added to the model must not be silently dropped by the AgentCore store."""
    mapped = {f.field for f in FIELD_MAP}
    top = PLACED_ELSEWHERE | {f.split(".")[0] for f in mapped}
    unmapped = set(MemoryRecord.model_fields) - top
    unmapped |= {f"provenance.{n}" for n in Provenance.model_fields} - mapped
    assert not unmapped, f"AgentCore FIELD_MAP misses {sorted(unmapped)}"


@pytest.mark.parametrize(
    ("field", "value"), [("subject", "x" * 300), ("owner", "tab\there"), ("subject", "sha256:x")]
)
def test_values_that_do_not_fit_round_trip_through_the_blob(field: str, value: str) -> None:
    rec = MemoryRecord(
        id="m-1",
        actor_id="u-1",
        namespace="/u/1",
        memory_type="semantic",
        content="c",
        created_at=datetime(2026, 1, 2, tzinfo=UTC),
        provenance=Provenance(supersedes=["a", "b"]),
        **{field: value},
    )
    meta, blob = encode_metadata(rec)
    assert meta[field]["stringValue"].startswith("sha256:")
    fields = decode_metadata(meta, blob)
    assert fields[field] == value
    assert fields["provenance"]["supersedes"] == ["a", "b"]
    assert decode_metadata(meta, None).get(field) != value  # the blob is what restores it


def test_invalid_reason_names_the_limit() -> None:
    base = dict(id="m", actor_id="u", memory_type="semantic", created_at=datetime.now(UTC))
    too_long = MemoryRecord(namespace="/a", content="x" * 16_001, **base)
    bad_ns = MemoryRecord(namespace="/a b", content="x", **base)
    assert "16000" in (invalid_reason(too_long) or "")
    assert "namespace" in (invalid_reason(bad_ns) or "")
    assert invalid_reason(MemoryRecord(namespace="/a", content="x", **base)) is None


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("created_at", {"stringValue": "yesterday"}, "created_at"),
        ("access_count", {"stringValue": "many"}, "access_count"),
        ("status", {"stringValue": "lost"}, "status"),
    ],
)
def test_a_record_that_does_not_decode_names_record_and_field(
    key: str, value: dict[str, str], field: str
) -> None:
    good = MemoryRecord(
        id="m-1",
        actor_id="u-1",
        namespace="/u/1",
        memory_type="semantic",
        content="c",
        created_at=datetime(2026, 1, 2, tzinfo=UTC),
    )
    meta, _ = encode_metadata(good)
    raw = {
        "memoryRecordId": "mem-9",
        "namespaces": ["/u/1"],
        "content": {"text": "c"},
        "metadata": {**meta, key: value},
    }
    assert decode_record({**raw, "metadata": meta}, None) == good  # the untouched one decodes
    with pytest.raises(CorruptRecordError) as err:
        decode_record(raw, None)
    assert (err.value.record_id, err.value.field, err.value.code) == (
        "mem-9",
        field,
        "CORRUPT_RECORD",
    )
    assert "lost" not in str(err.value) and "many" not in str(err.value)  # ids and codes only


@pytest.mark.parametrize(
    "when",
    [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 12, 4, 13, 0, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
    ],
)
def test_every_time_a_record_can_hold_is_written_so_it_reads_back(when: datetime) -> None:
    """The importer takes any past created_at; AgentCore's metadata holds it as text. Years
    under 1000 were written unpadded ("1-01-01T...") and could not be read back."""
    written = iso(when)
    assert len(written) == len("2026-12-04T13:00:00.000000Z")
    assert parse_time(written) == when
