"""The import's fast path for one JSONL line: raw bytes -> a record, or None.

The checked path (``model.parse_record_line``) decodes with ``json.loads``, encodes the
object again and validates it into the pydantic model, whose field validators run in
Python: ~60 us a line. Here pydantic-core validates the raw bytes straight into a plain
dict against a schema of the same types and bounds (no second parse, no model build),
then the model's few Python checks run once, and the record is assembled without a second
validation: ~20 us (CPU, 20k demo lines, under load).

The fast path accepts a subset of what the checked path accepts and builds the same
record; whatever it does not accept (any error, an unusual value) returns None and the
caller takes the checked path, which names line, id and field. So errors always come from
one place. ``tests/unit/test_fast_record.py`` holds the two paths equal on generated
lines, hostile ones included.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from typing import Annotated, Any, NotRequired, TypeVar

import pydantic_core
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    with_config,
)
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

from memlife.model import (
    MemoryRecord,
    MemoryType,
    Provenance,
    RetentionClass,
    Source,
    Status,
    content_sha256,
    repeats_a_key,
)
from memlife.namespaces import new_namespace_problem
from memlife.text import negates, norm_sha256

_STRICT = ConfigDict(extra="forbid", strict=True)


@with_config(_STRICT)
class _ProvenanceDict(TypedDict):
    source_event: NotRequired[str | None]
    policy_version: NotRequired[str | None]
    replaced_by: NotRequired[str | None]
    supersedes: NotRequired[list[str]]
    content_sha256: NotRequired[str | None]


# A time the fast path takes: ISO-8601 of one plain shape, a zone required ("Z" or +hh:mm).
# On this shape datetime.fromisoformat and the model's parser (Instant) agree (calendar
# errors such as 02-30 raise here and go to the checked path); anything else, numbers as
# text included, goes to the checked path. Parsing here skips a Python validator call per
# time inside pydantic (a third of the fast path's time).
_ISO_TIME = (
    r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?"
    r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)
_Time = Annotated[str, Field(pattern=_ISO_TIME)]
_from_iso = datetime.fromisoformat


# The same fields, types and bounds as MemoryRecord's, times as text of the shape above
# (test_fast_record checks names and required ones; its generated lines, the values)
@with_config(_STRICT)
class _RecordDict(TypedDict):
    id: Annotated[str, Field(min_length=1, max_length=256)]
    actor_id: Annotated[str, Field(min_length=1, max_length=256)]
    namespace: Annotated[str, Field(min_length=1, max_length=1024)]
    memory_type: MemoryType
    content: Annotated[str, Field(min_length=1)]
    created_at: _Time
    subject: NotRequired[str | None]
    owner: NotRequired[str | None]
    confidence: NotRequired[Annotated[float, Field(ge=0.0, le=1.0)]]
    source: NotRequired[Source]
    last_accessed_at: NotRequired[_Time | None]
    access_count: NotRequired[Annotated[int, Field(ge=0, le=2**63 - 1)]]
    last_verified_at: NotRequired[_Time | None]
    expires_at: NotRequired[_Time | None]
    retention_class: NotRequired[RetentionClass]
    status: NotRequired[Status]
    status_changed_at: NotRequired[_Time | None]
    provenance: NotRequired[_ProvenanceDict]


_VALIDATE = TypeAdapter(_RecordDict).validator.validate_json  # the core call, no wrapper
_TIMES = ("created_at", "last_accessed_at", "last_verified_at", "expires_at", "status_changed_at")
_PROV_DEFAULTS: dict[str, Any] = {
    "source_event": None,
    "policy_version": None,
    "replaced_by": None,
    "supersedes": None,  # a fresh list each time, like the model's default_factory
    "content_sha256": None,
}


@lru_cache(maxsize=4096)
def _plain_key(key: str) -> bool:
    # printable ASCII; any other id or actor goes to the checked path (memlife.text.invisible_at)
    return key.isascii() and key.isprintable()


@lru_cache(maxsize=4096)
def _plain_actor(actor: str) -> bool:
    # and no space at either end (model.parse_record names it, as remember refuses it)
    return _plain_key(actor) and actor[0] != " " and actor[-1] != " "


def _namespace_ok(namespace: str) -> bool:
    # namespaces repeat across an import; MemoryRecord._clean_namespace runs the same check
    return new_namespace_problem(namespace) is None


_new = object.__new__
_set = object.__setattr__


M = TypeVar("M", bound=BaseModel)


def _build(cls: type[M], fields: dict[str, Any], present: set[str]) -> M:
    """A model instance from values already validated to its schema (no second validation)."""
    obj: M = _new(cls)  # pydantic models define no __new__ of their own
    _set(obj, "__dict__", fields)
    _set(obj, "__pydantic_fields_set__", present)
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


# every key the model knows, quoted: a line naming one twice goes the checked way, which
# refuses a repeated key (JSON parsers keep the last: a second "retention_class" would
# silently drop a legal hold). A content that merely quotes a key name only goes slower.
_QUOTED_KEYS = tuple(
    f'"{k}"'.encode() for k in (*MemoryRecord.model_fields, *Provenance.model_fields)
)


def _may_repeat_a_key(raw: bytes | str) -> bool:
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if b"\\u" in data:  # a key may be spelled with escapes: parse to know
        return repeats_a_key(data)
    return any(data.count(k) > 1 for k in _QUOTED_KEYS)


def fast_record(raw: bytes | str) -> MemoryRecord | None:
    """The record on this line, or None: then the checked path decides (and names the error)."""
    if _may_repeat_a_key(raw):
        return None
    try:
        d = _VALIDATE(raw)
    except ValidationError:
        return None
    present = set(d)
    # MemoryRecord's Python validators: not blank, a clean namespace, timestamps in UTC
    if not (
        d["id"].strip()
        and d["actor_id"].strip()
        and d["content"].strip()
        and d["namespace"].strip()
    ) or not (
        _plain_key(d["id"]) and _plain_actor(d["actor_id"]) and _namespace_ok(d["namespace"])
    ):
        return None
    get = d.get
    # in the model's field order: a model serialises its __dict__ in that order
    fields: dict[str, Any] = {
        "id": d["id"],
        "actor_id": d["actor_id"],
        "namespace": d["namespace"],
        "memory_type": d["memory_type"],
        "content": d["content"],
        "created_at": d["created_at"],
        "subject": get("subject"),
        "owner": get("owner"),
        "confidence": get("confidence", 1.0),
        "source": get("source", Source.user_stated),
        "last_accessed_at": get("last_accessed_at"),
        "access_count": get("access_count", 0),
        "last_verified_at": get("last_verified_at"),
        "expires_at": get("expires_at"),
        "retention_class": get("retention_class", RetentionClass.standard),
        "status": get("status", Status.active),
        "status_changed_at": get("status_changed_at"),
        "provenance": None,
    }
    try:
        for name in _TIMES:
            text: str | None = fields[name]
            if text is not None:
                fields[name] = _from_iso(text).astimezone(UTC)  # as MemoryRecord._utc does
    except (ValueError, OverflowError):  # no such date, or out of range once in UTC
        return None
    prov = get("provenance")
    pfields = dict(_PROV_DEFAULTS)
    if prov is not None:
        pfields.update(prov)
    if pfields["supersedes"] is None:
        pfields["supersedes"] = []
    fields["provenance"] = _build(Provenance, pfields, set(prov or ()))
    if fields["status"] is Status.superseded and not pfields["replaced_by"]:
        return None  # invariant 3 at the door (parse_record): the checked path names it
    declared = pfields["content_sha256"]
    if declared and declared != content_sha256(fields["content"]):
        return None  # another content's hash (import_parse.check_declared_sha256 names it)
    return _build(MemoryRecord, fields, present)


_PROV_JSON = pydantic_core.to_json  # Provenance.model_dump_json's serializer, on a dict
_PROV_KEYS = tuple(_PROV_DEFAULTS)


def fast_row(raw: bytes | str) -> tuple[Any, ...] | None:
    """The store row (``record_to_row``) of the record on this line, or None (checked path).

    The same acceptance as :func:`fast_record`, without building the record: the import's
    worker processes send rows, and the record is only needed for the rare line that
    meets an existing id (rebuilt from the row, ``row_to_record``).
    """
    if _may_repeat_a_key(raw):
        return None
    try:
        d = _VALIDATE(raw)
    except ValidationError:
        return None
    rid, actor, namespace, content = d["id"], d["actor_id"], d["namespace"], d["content"]
    if not (rid.strip() and actor.strip() and content.strip() and namespace.strip()) or not (
        _plain_key(rid) and _plain_actor(actor) and _namespace_ok(namespace)
    ):
        return None
    get = d.get
    iso: list[str | None] = []
    ts: list[float | None] = []
    try:
        for name in _TIMES:
            text: str | None = get(name)
            if text is None:
                iso.append(None)
                ts.append(None)
            else:
                value = _from_iso(text).astimezone(UTC)  # as MemoryRecord._utc does
                iso.append(value.isoformat())
                ts.append(value.timestamp())
    except (ValueError, OverflowError):  # no such date, or out of range once in UTC
        return None
    prov = get("provenance")
    if prov is None:
        pfields = _NO_PROVENANCE
    elif tuple(prov) == _PROV_KEYS and prov["supersedes"] is not None:
        pfields = prov  # every key, in the model's order (an exported file): as it is
    else:
        pfields = {k: prov.get(k, _PROV_DEFAULTS[k]) for k in _PROV_KEYS}
        if pfields["supersedes"] is None:
            pfields["supersedes"] = []
    status = get("status", Status.active)
    if status is Status.superseded and not pfields["replaced_by"]:
        return None  # invariant 3 at the door (parse_record): the checked path names it
    sha = content_sha256(content)
    declared = pfields["content_sha256"]
    if declared and declared != sha:
        return None  # another content's hash (import_parse.check_declared_sha256 names it)
    # the columns of stores.sqlite.record_to_row, in its order
    return (
        rid,
        actor,
        namespace,
        str.__str__(d["memory_type"]),
        get("subject"),
        content,
        get("owner"),
        get("confidence", 1.0),
        str.__str__(get("source", Source.user_stated)),
        iso[0],
        iso[1],
        get("access_count", 0),
        iso[2],
        iso[3],
        str.__str__(get("retention_class", RetentionClass.standard)),
        str.__str__(status),
        iso[4],
        _PROV_JSON(pfields).decode(),
        sha,
        norm_sha256(content),
        int(negates(content)),
        ts[0],
        ts[1],
        ts[2],
        ts[3],
        ts[4],
    )


_NO_PROVENANCE: dict[str, Any] = {**_PROV_DEFAULTS, "supersedes": []}
