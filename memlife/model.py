"""The lifecycle record: the import/export contract of DESIGN.md, one JSON object per line.

Every timestamp is timezone-aware UTC; a naive timestamp is an error, not a guess.
Validation errors are re-raised as :class:`RecordError`, which names the record id
(when the input carried one) and the field, so a bad line in a million is findable.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import sys
import time
import unicodedata
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, NamedTuple

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from memlife.errors import MemlifeError, field_place
from memlife.errors import RecordError as RecordError  # moved; re-exported


class MemoryType(StrEnum):
    episodic = "episodic"  # events; fade fast
    semantic = "semantic"  # facts, preferences
    procedural = "procedural"  # how-to, approved workflows; strictest gates


class Source(StrEnum):
    system_of_record = "system_of_record"
    user_stated = "user_stated"
    user_confirmed = "user_confirmed"
    agent_inferred = "agent_inferred"  # weakest


class RetentionClass(StrEnum):
    standard = "standard"
    sensitive = "sensitive"
    legal_hold = "legal_hold"


class Status(StrEnum):
    active = "active"
    superseded = "superseded"  # has provenance.replaced_by
    pending_delete = "pending_delete"
    retained = "retained"  # held
    quarantined = "quarantined"  # recoverable, invisible to recall


# A statement dated later than this past a run's cutoff is reported at import and never
# wins a consolidation (a record dated 2099 must not supersede genuine newer statements).
FUTURE_SKEW = timedelta(minutes=5)


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    try:  # 9999-12-31T23:59:59-05:00 is past datetime.max once in UTC
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("timestamp out of range once converted to UTC") from None


_EPOCH_TEXT = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


def _iso_only(value: Any) -> Any:
    """A record's times are ISO-8601 text with a zone (or datetimes, from Python). Strict
    JSON mode would still read a numeric string as epoch seconds ("1700000000" becomes
    2023-11-14): a number is never guessed into a time, as text or not. The text itself is
    parsed by pydantic's own datetime parser, so every other form keeps its rules."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO-8601 timestamp, got {type(value).__name__}")
    if _EPOCH_TEXT.fullmatch(value):
        raise ValueError("expected an ISO-8601 timestamp with a time zone, got a number as text")
    if _SUB_MICROSECOND.search(value):  # the parser would cut them silently
        raise ValueError("more than 6 digits of fractional seconds (microseconds are kept)")
    try:
        return _PARSE_TIME(value, strict=False)
    except ValidationError as exc:
        raise ValueError(exc.errors(include_url=False)[0]["msg"]) from None


_PARSE_TIME = TypeAdapter(datetime).validate_python
_SUB_MICROSECOND = re.compile(r":[0-9]{2}[.,][0-9]{7,}")
# A point in time as records carry it; the zone is required (AwareDatetime).
Instant = Annotated[AwareDatetime, BeforeValidator(_iso_only)]


def content_sha256(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


class Provenance(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source_event: str | None = None
    policy_version: str | None = None  # policy version that last changed the record
    replaced_by: str | None = None
    supersedes: list[str] = Field(default_factory=list)
    content_sha256: str | None = None


_ID_MAX = 256  # a record id's length bound (also what a refusal may echo: _shown_id)


class MemoryRecord(BaseModel):
    """One memory. Required: id, actor_id, namespace, memory_type, content, created_at."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    id: str = Field(min_length=1, max_length=_ID_MAX)
    actor_id: str = Field(min_length=1, max_length=256)
    namespace: str = Field(min_length=1, max_length=1024)
    memory_type: MemoryType
    content: str = Field(min_length=1)
    created_at: Instant
    subject: str | None = None  # what the fact is about; groups never cross subjects
    owner: str | None = None  # team answerable; missing -> review, never deletion
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    source: Source = Source.user_stated
    last_accessed_at: Instant | None = None
    access_count: int = Field(default=0, ge=0, le=2**63 - 1)  # SQLite INTEGER
    last_verified_at: Instant | None = None
    expires_at: Instant | None = None
    retention_class: RetentionClass = RetentionClass.standard
    status: Status = Status.active
    status_changed_at: Instant | None = None  # when status last changed (grace periods)
    provenance: Provenance = Field(default_factory=Provenance)

    @field_validator("content", "id", "actor_id", "namespace")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be blank")
        return v

    @field_validator("namespace")
    @classmethod
    def _clean_namespace(cls, v: str) -> str:
        from memlife.namespaces import stored_namespace_problem

        # a record built from a stored one (a merge, an erasure's rebuild, an AgentCore read)
        # keeps a namespace written before the leading '/' was required; new ones are
        # checked with the rule at the door (parse_record, memlife.online.inputs)
        problem = stored_namespace_problem(v)
        if problem:
            raise ValueError(f"namespace {problem}")
        return v

    @field_validator(
        "created_at", "last_accessed_at", "last_verified_at", "expires_at", "status_changed_at"
    )
    @classmethod
    def _to_utc(cls, v: datetime | None) -> datetime | None:
        return _utc(v)

    @property
    def sha256(self) -> str:
        return self.provenance.content_sha256 or content_sha256(self.content)

    def as_stored(self) -> MemoryRecord:
        """The record as a store writes it: a declared ``provenance.content_sha256`` that is
        not its content's (a copy edited with ``model_copy``, which runs no validator) is
        replaced by the content's. Review items, memos and tombstones trust the stored hash:
        a stale one let a reviewer's answer for old text stand for new text."""
        declared = self.provenance.content_sha256
        if not declared:
            return self
        actual = content_sha256(self.content)
        if declared == actual:
            return self
        return self.model_copy(
            update={"provenance": self.provenance.model_copy(update={"content_sha256": actual})}
        )

    @property
    def held(self) -> bool:
        """Under legal hold or retained: nothing changes or removes it (invariant 1). The
        one place this is decided; every writer asks the record (or :func:`is_held`)."""
        return is_held(self.retention_class, self.status)

    def to_json(self) -> str:
        return self.model_dump_json()


class PlanView(NamedTuple):
    """What planning needs of a record, and nothing more: no content, times as epoch seconds.

    Built straight from store rows (cheap at 1M records) or from a MemoryRecord with
    :func:`plan_view`; ``norm_sha256`` and ``negated`` are derived from the content once.
    """

    id: str
    actor_id: str
    namespace: str
    memory_type: MemoryType
    subject: str | None
    owner: str | None
    source: Source
    created: float
    last_accessed: float | None
    access_count: int
    last_verified: float | None
    expires: float | None
    retention_class: RetentionClass
    status: Status
    status_changed: float | None
    content_sha256: str
    norm_sha256: str  # the statement key: records with the same one say the same thing
    negated: bool
    confidence: float = 1.0
    subject_inferred: bool = False  # the subject came from group.infer_subjects, not a person


class Link(NamedTuple):
    """What a hold's pin on replacements needs of a record (memlife/pinned.py): no content."""

    held: bool
    replaced_by: str | None
    supersedes: tuple[str, ...]


def link_of(r: MemoryRecord) -> Link:
    return Link(r.held, r.provenance.replaced_by, tuple(r.provenance.supersedes))


def is_held(retention_class: str, status: str) -> bool:
    """:attr:`MemoryRecord.held` from the two stored values (a store's fast path gives
    plain strings; the enums compare equal to them)."""
    return retention_class == RetentionClass.legal_hold or status == Status.retained


def _epoch(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def plan_view(r: MemoryRecord) -> PlanView:
    from memlife.text import negates, norm_sha256

    return PlanView(
        r.id, r.actor_id, r.namespace, r.memory_type, r.subject, r.owner, r.source,
        r.created_at.timestamp(), _epoch(r.last_accessed_at), r.access_count,
        _epoch(r.last_verified_at), _epoch(r.expires_at), r.retention_class, r.status,
        _epoch(r.status_changed_at), r.sha256, norm_sha256(r.content), negates(r.content),
        r.confidence,
    )  # fmt: skip


def _first_error(exc: ValidationError) -> tuple[str, str]:
    err = exc.errors(include_url=False)[0]
    return field_place(err["loc"]) or "<record>", err["msg"]  # never a key's text


def parse_record(data: Any, line: int | None = None) -> MemoryRecord:
    """Validate a decoded JSON object into a record, raising RecordError on the first bad field.

    Validation is strict JSON: no silent coercion (``"5"`` is not a count, ``true`` is not a
    confidence, an epoch number is not a timestamp).
    """
    if not isinstance(data, dict):
        raise RecordError(
            None, "<record>", f"expected a JSON object, got {type(data).__name__}", line
        )
    rid = _shown_id(data.get("id"))
    bad = _lone_surrogate(data)
    if bad is not None:  # JSON's \ud800 escape: text no store or terminal can write
        raise RecordError(rid if bad != "id" else None, field_place(bad.split(".")),
                          "holds a lone surrogate: not valid Unicode", line)  # fmt: skip
    from memlife.text import invisible_at

    for name in ("id", "actor_id"):  # keys a person types, reads and erases by
        key = data.get(name)
        at = invisible_at(key) if isinstance(key, str) else None
        if isinstance(key, str) and at is not None:  # the hostile id is not echoed
            raise RecordError(
                rid if name != "id" else None,
                name,
                f"has an invisible character (U+{ord(key[at]):04X}) at character {at}",
                line,
            )
        if isinstance(key, str) and not unicodedata.is_normalized("NFC", key):
            raise RecordError(  # "jose\u0301" prints as "jos\u00e9": another key, one look
                rid if name != "id" else None, name, "is not in Unicode normal form NFC", line
            )
        if name == "actor_id" and isinstance(key, str) and (why := _lookalike(key)):
            raise RecordError(rid, name, why, line)
    try:
        record = MemoryRecord.model_validate_json(json.dumps(data, default=str), strict=True)
    except ValidationError as exc:
        field, reason = _first_error(exc)
        if field == "id" and rid and rid.strip():  # a refused id (300 characters) may be the
            rid = None  # line's text one column off: its place only, as evaluation sets do
        raise RecordError(rid, field, reason, line) from None
    from memlife.namespaces import new_namespace_problem

    problem = new_namespace_problem(record.namespace)
    if problem:  # a new record's namespace starts with '/' (every policy glob does)
        raise RecordError(rid, "namespace", f"namespace {problem}", line)
    if record.status is Status.superseded and not record.provenance.replaced_by:
        # invariant 3 at the door: a superseded record must point to its replacement
        raise RecordError(rid, "provenance.replaced_by", "required when status is superseded", line)
    return record


def _lookalike(actor: str) -> str | None:
    """Why ``actor`` reads as another actor, as remember, recall and a LangGraph put refuse
    it (online.inputs.actor_arg): "u1 " or the fullwidth "\\uff551" is a second u1 that
    `erase --actor u1` misses and recall refuses. A '/' stays: AgentCore's actor ids allow
    it, and an imported line writes its namespace out."""
    if actor != actor.strip():
        return "has leading or trailing whitespace"
    if not unicodedata.is_normalized("NFKC", actor):
        return "is not in Unicode NFKC form: it would look like another actor"
    return None


def _lone_surrogate(data: dict[str, Any], prefix: str = "") -> str | None:
    """The first field (dotted: ``provenance.supersedes``) whose text holds a lone UTF-16
    surrogate, which ``json.loads`` decodes from a ``\\ud800`` escape; None when none does."""
    for key, value in data.items():
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(t, str) and not _encodes(t) for t in texts):
            return f"{prefix}{key}"
        if isinstance(value, dict):
            inner = _lone_surrogate(value, f"{prefix}{key}.")
            if inner is not None:
                return inner
    return None


def _encodes(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_record_line(text: str, line: int | None = None) -> MemoryRecord:
    """Parse one JSONL line; malformed JSON is a RecordError on field '<json>', and a key
    written twice in one object is a RecordError on that key (JSON parsers keep the last
    value: a second "retention_class" would silently drop a legal hold)."""
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys, parse_int=_int)
    except json.JSONDecodeError as exc:
        raise RecordError(
            None, "<json>", f"malformed JSON: {exc.msg} at column {exc.colno}", line
        ) from None
    except _RepeatedKey as exc:
        rid = _id_in(text)
        raise RecordError(rid, field_place([exc.key]), "key repeated in the line", line) from None
    limit = sys.get_int_max_str_digits()
    at = _too_many_digits_at(data) if limit and len(text) > limit else None
    if at is not None:  # no field takes such a number; never echoed (audit 52g)
        rid = _shown_id(data.get("id")) if isinstance(data, dict) else None
        reason = f"an integer of more than {limit} digits"
        place = at if at == "<record>" else field_place(at.split("."))
        raise RecordError(rid, place, reason, line)
    return parse_record(data, line)


class _TooManyDigits:
    """An integer literal with more digits than ``int()`` converts: ``json.loads`` raised a
    bare ValueError there, which stopped a whole import at one line (audit 52g); kept as
    this marker, the line is refused naming the field."""


_TOO_MANY_DIGITS = _TooManyDigits()


def _int(text: str) -> int | _TooManyDigits:
    try:
        return int(text)
    except ValueError:  # past sys.get_int_max_str_digits(): the only way a JSON int fails
        return _TOO_MANY_DIGITS


def _too_many_digits_at(value: Any, at: str = "") -> str | None:
    """The first field (dotted as pydantic writes a location) holding such a marker."""
    if value is _TOO_MANY_DIGITS:
        return at or "<record>"
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, inner in items:
        found = _too_many_digits_at(inner, f"{at}.{key}" if at else str(key))
        if found is not None:
            return found
    return None


class _RepeatedKey(MemlifeError, ValueError):
    """Raised inside json.loads by the pairs hook; parse_record_line turns it into a
    RecordError naming the key."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


def repeats_a_key(raw: bytes | str) -> bool:
    """Does some object of this JSON line name a key twice (escapes decoded)?"""
    try:
        json.loads(raw, object_pairs_hook=_unique_keys)
    except _RepeatedKey:
        return True
    except (ValueError, RecursionError):  # malformed, not UTF-8 or nested past the C
        return False  # parser's limit (a short line of 1,100 "["): the validator refuses it
    return False


def _id_in(text: str) -> str | None:
    """The line's id for the error, when the line parses with repeats allowed."""
    try:
        data = json.loads(text, parse_int=_int)  # a number past the digit limit: still named
    except (ValueError, RecursionError):
        return None
    return _shown_id(data.get("id")) if isinstance(data, dict) else None


def _shown_id(value: object) -> str | None:
    """A line's id as a refusal may name it: one a record can carry. A longer one is no id
    but the line's text one column off, whatever refuses the line first (a repeated key,
    a lone surrogate, the actor id): 53cl left it out only where the model refused the id
    itself (audit 53r2)."""
    return value if isinstance(value, str) and len(value) <= _ID_MAX else None


def utcnow() -> datetime:
    return datetime.now(UTC)


def parse_time(value: str) -> datetime:
    """Parse an ISO-8601 instant; a naive value is rejected (we never guess a zone)."""
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        raise ValueError(f"timestamp {value!r} has no timezone")
    try:  # a ValueError as _utc's: an OverflowError passed every caller's `except ValueError`
        return dt.astimezone(UTC)  # (--now, AgentCore's stored times: audit 50f)
    except OverflowError:
        raise ValueError(f"timestamp {value!r} is out of range once converted to UTC") from None


LATEST = datetime.max.replace(tzinfo=UTC)


def days_after(at: datetime, days: float) -> datetime:
    """``at`` plus ``days``, or the calendar's last instant where that is past it: a
    deadline worked out from a statement dated 9999 (imported with a FUTURE_CREATED_AT
    warning) raised OverflowError in every reader of it, the gate's among them (audit 50f)."""
    try:
        return at + timedelta(days=days)
    except OverflowError:
        return LATEST


def new_memory_id() -> str:
    """``m-`` + a UUIDv7-layout hex (48-bit ms time, then 74 random bits): unique, time-sorted."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(secrets.token_bytes(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64
    value |= 0b10 << 62 | (rand & ((1 << 62) - 1))
    return f"m-{value:032x}"
