"""Record <-> AgentCore memory record: limits, the field map, value encoding. Pure.

Nothing here calls a service; ``store.py`` reads and writes, this module only translates.
Why each choice (digests for values that do not fit, fixed-width timestamps, the overflow
hash) is in the package docstring and ``docs/agentcore.md``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from memlife.errors import CorruptRecordError
from memlife.model import MemoryRecord, MemoryType, Source, parse_time
from memlife.stores.agentcore_sidecar import BLOBS_MAX, blobs_text
from memlife.stores.base import BadPageToken

# -- AgentCore limits (from the botocore service model, bedrock-agentcore 2024-02-28) ----
MAX_PAGE = 100  # ListMemoryRecords / ListActors maxResults
MAX_CONTENT = 16_000  # MemoryContentTextString
MAX_NAMESPACE = 1024  # Namespace string length
MAX_METADATA_KEYS = 20  # MemoryRecordMetadataMap
MAX_META_VALUE = 256  # StringValue
MAX_INDEXED_KEYS = 10  # IndexedKeysList (control plane)
META_VALUE_RE = re.compile(r"[a-zA-Z0-9\s._:/=+@-]*", re.ASCII)  # the service's pattern
# What we write is stricter: space is the only whitespace we trust to round-trip unchanged.
_SAFE_VALUE_RE = re.compile(r"[a-zA-Z0-9 ._:/=+@-]+", re.ASCII)
NAMESPACE_RE = re.compile(
    r"[a-zA-Z0-9/*][a-zA-Z0-9\-_/*]*(?::[a-zA-Z0-9\-_/*]+)*[a-zA-Z0-9\-_/*]*", re.ASCII
)
MEMORY_RECORD_ID_RE = re.compile(r"mem-[a-zA-Z0-9\-_]{36,46}", re.ASCII)
DIGEST_PREFIX = "sha256:"
ID_KEY = "memlife_id"
OVERFLOW_KEY = "memlife_overflow"


@dataclass(frozen=True)
class FieldMap:
    """One MemoryRecord field and where it lives in AgentCore."""

    field: str  # dotted path in MemoryRecord
    key: str | None  # metadata key; None: sidecar only
    kind: str  # str | enum | ts | num | int | list
    indexed: str | None = None  # IndexedKey type to declare on the memory, if filterable


# The mapping table. id/actor/namespace/content also have dedicated places (package doc).
# tests/unit/test_agentcore_mapping.py checks it covers every model field and fits the budgets.
FIELD_MAP: tuple[FieldMap, ...] = (
    FieldMap("id", ID_KEY, "str", "STRING"),
    FieldMap("actor_id", "actor_id", "str", "STRING"),
    FieldMap("memory_type", "memory_type", "enum", "STRING"),
    FieldMap("subject", "subject", "str", "STRING"),
    FieldMap("owner", "owner", "str"),
    FieldMap("confidence", "confidence", "num"),
    FieldMap("source", "source", "enum"),
    FieldMap("created_at", "created_at", "ts"),
    FieldMap("last_accessed_at", "last_accessed_at", "ts"),
    FieldMap("access_count", "access_count", "int"),
    FieldMap("last_verified_at", "last_verified_at", "ts"),
    FieldMap("expires_at", "expires_at", "ts", "STRING"),
    FieldMap("retention_class", "retention_class", "enum", "STRING"),
    FieldMap("status", "status", "enum", "STRING"),
    FieldMap("status_changed_at", "status_changed_at", "ts"),
    FieldMap("provenance.source_event", "source_event", "str"),
    FieldMap("provenance.policy_version", "policy_version", "str"),
    FieldMap("provenance.replaced_by", "replaced_by", "str"),
    FieldMap("provenance.content_sha256", "content_sha256", "str"),
    FieldMap("provenance.supersedes", None, "list"),
)
# Declare these as ``indexedKeys`` when creating the memory (CreateMemory/UpdateMemory).
INDEXED_KEYS: list[dict[str, str]] = [
    {"key": f.key, "type": f.indexed} for f in FIELD_MAP if f.indexed and f.key
]
# The budget is full (20 of 20): a new record field must be sidecar-only (key None).
META_KEYS: list[str] = [f.key for f in FIELD_MAP if f.key] + [OVERFLOW_KEY]
# Elsewhere in AgentCore: namespace -> namespaces[0], content -> content.text.
PLACED_ELSEWHERE = frozenset({"namespace", "content"})

# AgentCore strategy type -> our memory type, for records AgentCore extracted by itself.
_NATIVE_TYPE = {"EPISODIC": MemoryType.episodic, "SUMMARIZATION": MemoryType.episodic}


# -- value encoding ------------------------------------------------------------------------
def fits_metadata(value: str) -> bool:
    """Whether a string is written to metadata as itself (else digest + sidecar)."""
    return (
        len(value) <= MAX_META_VALUE
        and _SAFE_VALUE_RE.fullmatch(value) is not None
        and value == value.strip()
        and not value.startswith(DIGEST_PREFIX)  # keeps digests unambiguous
    )


def safe_value(value: str) -> str:
    """The metadata form of a string: itself if it fits, else ``sha256:<hex>``."""
    if fits_metadata(value):
        return value
    return DIGEST_PREFIX + hashlib.sha256(value.encode("utf-8")).hexdigest()


def iso(value: datetime) -> str:
    """Fixed width, the year in four digits: glibc's %Y writes year 1 as "1", which
    fromisoformat cannot read back (the same string as strftime for years 1000 on)."""
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def blob_hash(blob: dict[str, Any]) -> str:
    raw = json.dumps(blob, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def _get_path(record: MemoryRecord, path: str) -> Any:
    obj: Any = record
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def encode_metadata(record: MemoryRecord) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(metadata, overflow blob)`` for a record; the blob is empty when all fits."""
    meta: dict[str, Any] = {}
    blob: dict[str, Any] = {}
    record = record.as_stored()  # the content's own hash, never a stale declared one
    for f in FIELD_MAP:
        value = _get_path(record, f.field)
        if value is None:
            continue  # absent key = None
        if f.kind == "list":
            if value:
                blob[f.field] = list(value)
            continue
        key = str(f.key)  # every non-list field has a metadata key (FIELD_MAP)
        if f.kind == "ts":
            meta[key] = {"stringValue": iso(value)}
        elif f.kind == "int" and abs(value) > 2**53:
            # a double holds an int exactly only to 2**53 (2**63-1 read back as 2**63, past
            # the model's bound: the record, and its shard, unreadable); decode reads digits
            meta[key] = {"stringValue": str(value)}
        elif f.kind in ("num", "int"):
            meta[key] = {"numberValue": float(value)}
        elif f.kind == "enum":
            meta[key] = {"stringValue": value.value}
        else:
            meta[key] = {"stringValue": safe_value(value)}
            if not fits_metadata(value):
                blob[f.field] = value
    if blob:
        meta[OVERFLOW_KEY] = {"stringValue": blob_hash(blob)}
    return meta, blob


def meta_value(meta: dict[str, Any], key: str) -> Any:
    """The plain value of one metadata entry, whatever its typed wrapper; None if absent."""
    v = meta.get(key)
    if not v:
        return None
    for k in ("stringValue", "numberValue", "stringListValue", "dateTimeValue"):
        if k in v:
            return v[k]
    return None


def decode_metadata(
    meta: dict[str, Any], blob: dict[str, Any] | None, record_id: str = "<unknown>"
) -> dict[str, Any]:
    """Record fields (nested provenance) from metadata plus the matching overflow blob.
    A value that does not convert raises CorruptRecordError naming the record and field."""
    out: dict[str, Any] = {"provenance": {}}
    blob = blob or {}
    for f in FIELD_MAP:
        if f.field in blob:
            value = blob[f.field]
        elif f.key is None:
            continue
        else:
            value = meta_value(meta, f.key)
            if value is None:
                continue
            try:
                if f.kind == "ts":
                    value = parse_time(value)
                elif f.kind == "int":
                    value = int(value)
                elif f.kind == "num":
                    value = float(value)
            except (ValueError, TypeError, AttributeError) as exc:  # a value of the wrong shape
                what = {"ts": "an ISO-8601 timestamp with a zone", "int": "an integer"}
                reason = f"not {what.get(f.kind, 'a number')} ({type(exc).__name__})"
                raise CorruptRecordError(record_id, f.field, reason) from None
        if f.field.startswith("provenance."):
            out["provenance"][f.field.split(".", 1)[1]] = value
        else:
            out[f.field] = value
    return out


# -- whole records -------------------------------------------------------------------------
def first_namespace(raw: dict[str, Any], default: str = "") -> str:
    return str((raw.get("namespaces") or [default])[0])


def is_ours(raw: dict[str, Any]) -> bool:
    """Written through memlife (carries ``memlife_id``), as opposed to extracted natively."""
    return ID_KEY in (raw.get("metadata") or {})


def decode_record(raw: dict[str, Any], blob: dict[str, Any] | None) -> MemoryRecord:
    """One of our records from AgentCore's shape plus its overflow blob (if it has one)."""
    rid = str(raw["memoryRecordId"])
    fields = decode_metadata(raw.get("metadata") or {}, blob, rid)
    fields.update(namespace=first_namespace(raw), content=raw["content"]["text"])
    try:
        return MemoryRecord.model_validate(fields)
    except ValidationError as exc:
        raise _corrupt(rid, exc) from None


def _corrupt(record_id: str, exc: ValidationError) -> CorruptRecordError:
    err = exc.errors(include_url=False)[0]
    field = ".".join(str(p) for p in err["loc"]) or "<record>"
    return CorruptRecordError(record_id, field, err["msg"])


def decode_native(raw: dict[str, Any], actor_id: str, strategy_type: str | None) -> MemoryRecord:
    """A record AgentCore extracted itself: adopted with lifecycle defaults."""
    created = raw["createdAt"]
    try:
        return MemoryRecord(
            id=raw["memoryRecordId"],
            actor_id=actor_id,
            namespace=first_namespace(raw),
            memory_type=_NATIVE_TYPE.get(strategy_type or "", MemoryType.semantic),
            content=raw["content"]["text"],
            created_at=created if created.tzinfo else created.replace(tzinfo=UTC),
            source=Source.agent_inferred,
        )
    except ValidationError as exc:
        raise _corrupt(str(raw["memoryRecordId"]), exc) from None


def invalid_reason(record: MemoryRecord) -> str | None:
    """Why AgentCore would refuse this record (checked before any call), or None."""
    if len(record.content) > MAX_CONTENT:
        return f"content is {len(record.content)} chars; AgentCore takes at most {MAX_CONTENT}"
    if len(record.namespace) > MAX_NAMESPACE or not NAMESPACE_RE.fullmatch(record.namespace):
        return "namespace does not match AgentCore's namespace pattern"
    return _overflow_too_large(record)


def _overflow_too_large(record: MemoryRecord) -> str | None:
    """Fields metadata cannot hold go to the sidecar item (DynamoDB: 400 KB); an overflow
    no item holds was refused by DynamoDB as a retryable "sidecar changed concurrently",
    naming no field, on every retry (audit 52ii). Field names and sizes, never values."""
    _, blob = encode_metadata(record)
    size = len(blobs_text({blob_hash(blob): blob})) if blob else 0
    if size <= BLOBS_MAX:
        return None
    fields = sorted(blob, key=lambda f: -len(json.dumps(blob[f])))
    return (f"{', '.join(fields)} (fields AgentCore metadata cannot hold) take {size} bytes in "
            f"the sidecar table; one DynamoDB item holds at most {BLOBS_MAX}")  # fmt: skip


# -- page tokens ---------------------------------------------------------------------------
def encode_token(memory_id: str, actor: str, ns: str, service_token: str) -> str:
    payload = json.dumps([memory_id, actor, ns, service_token], separators=(",", ":"))
    check = hashlib.sha256(payload.encode()).hexdigest()[:16]  # integrity, not secrecy
    return base64.urlsafe_b64encode(f"{check}{payload}".encode()).decode()


def decode_token(token: str, memory_id: str, actor: str, ns: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(token.encode()).decode()
        check, payload = raw[:16], raw[16:]
        if hashlib.sha256(payload.encode()).hexdigest()[:16] != check:
            raise ValueError("checksum")
        mem, a, n, service_token = json.loads(payload)
    except Exception:
        raise BadPageToken("page token is not a token of this store") from None
    if (mem, a, n) != (memory_id, actor, ns):
        raise BadPageToken("page token belongs to another memory/actor/namespace")
    return str(service_token)
