"""The embedded default store: one SQLite file (WAL, secure_delete) holding records.

The journal, the embedding cache and other side tables share the file (see
``SqliteStore.connection``) so one backup or one erasure covers everything.
Rows are trusted on the way out (validated on the way in), so records are built with
``model_construct``: paging 1M records must not pay for validation twice.

Why one module (over 500 lines): one backend. Schema, paging, batch writes and the state
tables that share its transactions (tombstones checked in the write's own transaction)
belong to the one connection they run on.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from pydantic import BaseModel

from memlife import faults
from memlife.errors import CorruptRecordError, NotAStoreError, StoreError
from memlife.fold_versions import (
    legacy_norm_sha256,
    v3_norm_sha256,
    v4_norm_sha256,
    v5_norm_sha256,
)
from memlife.model import (
    Link,
    MemoryRecord,
    MemoryType,
    PlanView,
    Provenance,
    RetentionClass,
    Source,
    Status,
    content_sha256,
    is_held,
    utcnow,
)
from memlife.sql_in import in_chunks, marks
from memlife.sqlite_open import connect_wal, existing_tables, rollback
from memlife.stores.base import DEFAULT_PAGE_SIZE, BadPageToken, BatchResult, ItemFailure, Page
from memlife.stores.sqlite_rows import VIEW_CHECKS, checked, corrupt_field, corrupt_record
from memlife.text import (
    FOLD_LEADING_POINT,
    FOLD_NO_SYMBOLS,
    FOLD_SIGNED_NUMBERS,
    FOLD_SIGNS,
    negates,
    norm_sha256,
    normalise,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    id TEXT PRIMARY KEY,
    actor_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    memory_type TEXT NOT NULL,
    subject TEXT,
    content TEXT NOT NULL,
    owner TEXT,
    confidence REAL NOT NULL,
    source TEXT NOT NULL,
    created_at TEXT NOT NULL,
    last_accessed_at TEXT,
    access_count INTEGER NOT NULL DEFAULT 0,
    last_verified_at TEXT,
    expires_at TEXT,
    retention_class TEXT NOT NULL,
    status TEXT NOT NULL,
    status_changed_at TEXT,
    provenance TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    norm_sha256 TEXT NOT NULL,   -- derived once at write: planning never reads content
    negated INTEGER NOT NULL,
    -- epoch-second copies of the timestamps: the planner reads these, never parses text
    created_ts REAL NOT NULL,
    last_accessed_ts REAL,
    last_verified_ts REAL,
    expires_ts REAL,
    status_changed_ts REAL
);
-- the paging order: keyset on (actor, namespace, id)
CREATE INDEX IF NOT EXISTS records_shard ON records (actor_id, namespace, id);
CREATE INDEX IF NOT EXISTS records_status ON records (actor_id, status);
-- erasure tombstones: ids and hashes only, never content (invariant 11)
CREATE TABLE IF NOT EXISTS tombstones (
    actor_id TEXT NOT NULL,
    record_id TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    norm_sha256 TEXT,
    erased_at TEXT NOT NULL,
    PRIMARY KEY (actor_id, record_id)
);
CREATE INDEX IF NOT EXISTS tombstones_sha ON tombstones (actor_id, content_sha256);
CREATE INDEX IF NOT EXISTS tombstones_norm ON tombstones (actor_id, norm_sha256);
"""

# The store file's version, in ``PRAGMA user_version`` (0 in a file from before it was
# kept; nothing else in the file uses the pragma). The tables themselves are created with
# IF NOT EXISTS and columns added in place (the journal's ``_ADDED``); the version marks
# what the derived columns were computed with, and an older file is brought up to date
# once, when opened (:meth:`SqliteStore._upgrade`):
#   1: norm_sha256 by the Unicode-aware fold (memlife.text.unicode_fold). Before it,
#      non-ASCII letters folded away ('Я пью чай.' had the key of '', 'У меня 2 кота.'
#      that of '2'), and every text folding to nothing had sha256(''); the rows that can
#      carry such a key (non-ASCII content, or that key) are recomputed from their content.
#      Tombstones cannot be: their content is gone. An older tombstone of non-ASCII
#      content keeps its exact content hash (an identical text stays refused) and the
#      old folded key it was written with: a case/punctuation variant of that text is no
#      longer refused by it (its new key differs), and a text whose new fold is that old
#      key ('1234' for an erased 'Мой код 1234') still is. Erasing again writes new keys.
#   2: the fold also drops every default-ignorable code point, makes digits of every
#      script ASCII and Turkish dotless/dotted i 'i', and keeps superscripts, subscripts
#      and fractions apart from neighbouring digits ('10²' is no longer '102'). Only
#      non-ASCII content folds differently: those rows are recomputed (the same pass as
#      for version 1, which a file at version 0 still takes once). Tombstones keep their
#      keys, as above: one of ASCII content is still right (and now also refuses, say,
#      the Arabic-Indic digits of its PIN); one of non-ASCII content written at version 1
#      refuses the identical text (exact hash) and the variants whose new fold equals its
#      old one, but not a variant only the new fold equates ('istanbul' for an erased
#      'İstanbul'). Erasing again writes new keys.
#   3: a sign, percent or currency is a word of the statement ('-18' is not '18', '5%' not
#      '5': text.symbols_as_words), and `negated` reads more negations ("cannot",
#      "neither", "isn’t" with a typographic apostrophe, "dont"). The rows whose content
#      can fold or negate differently (one of those symbols or words, or non-ASCII) get
#      both recomputed. Tombstones keep their keys, as above, and a text is checked under
#      both its key and its version-2 key (tombstone_norms): an older erasure refuses all
#      it refused (an erased '-18' text's old key still refuses '18' too).
#   4: a sign after a letter or standing alone is a word of the statement too: a
#      comparison anywhere ('<7' is not '>7', '≤ 120' not '≥ 120', '<=' is '≤'), a plus
#      anywhere ('C++', blood type 'A+', '18+'; one between spaces is 'and', as '&' is:
#      'tea + coffee' is 'tea & coffee' is 'tea and coffee'), a sharp after a letter that
#      no letter or digit follows ('C#' is not 'C'; 'Issue#42' is 'Issue #42'), a minus
#      after a letter that no letter, digit or dash follows ('O-' is not 'O+' or 'O'; a
#      suspended hyphen, 'pre- and post-op', is punctuation), a minus before a currency
#      sign ('-$50' is not '$50'), an arrow as its direction ('->', '→' 'right arrow',
#      '<-' 'left arrow'), and outside ASCII a symbol of category So as its name ('✓'
#      'check mark', '✗' 'ballot x', '👍' 'thumbs up'; a variation selector or skin tone
#      changes nothing). Hyphenated words ('well-known', 'e-mail'), dashes, and a '+', '-'
#      or '>' that starts a line before a space (a bullet, a quote) fold as before
#      (text.symbols_as_words). Only rows whose content holds one of '<', '>', '+', '#',
#      '!=', '&', '-' (already read for version 3; '->' and '-$' hold it), or non-ASCII
#      content, can fold differently: their keys are recomputed, other rows are not
#      written. Tombstones keep their keys, as above, and a text is checked under its key
#      and its version-3 and version-2 keys (tombstone_norms): an erased 'Blood type: O+'
#      written at version 3 (the key of 'blood type o') still refuses it, and, as in
#      version 3, also refuses 'Blood type: O-' and 'Blood type: O'; an erasure written
#      now refuses 'blood type O+' but not 'O-' (whose version-3 key is not the new
#      tombstone's), yet one of a sign-free text ('Blood type: O') also refuses 'O+' and
#      'O-' (their older keys are its key): a refusal too many, never an erased text back.
#      The older keys only refuse: an erasure selects live records by today's key and
#      exact hash (erase.text_keys), so erasing 'Knows C++' never erases 'Knows C'.
#   5: a decimal point opening a number is read as '0.' ('.5 mg' is '0.5 mg', no longer
#      '5 mg'; text.symbols_as_words): a dose ten times larger was an exact duplicate of
#      the smaller and refreshed it. Rows whose content holds a '.' before a digit are
#      recomputed. Tombstones keep their keys, and a text is checked under its version-4
#      key too (tombstone_norms): an erased '.5 mg' text still refuses '5 mg', as before.
#   6: a point between digits is a word ('1.5 mg' is no longer '1-5 mg', '1/5 mg' or
#      '1 5 mg'; text.symbols_as_words): a dose, a distance or a price given with a
#      decimal was an exact duplicate of a range and refreshed it, the new number lost.
#      Rows whose content holds a '.' before a digit are recomputed (as for version 5);
#      a text is checked against tombstones under its version-5 key too.
STORE_VERSION = 6
_REFOLD_BATCH = 2000
_OLD_EMPTY_KEY = content_sha256("")  # before version 1, the key of every empty fold

COLUMNS = (
    "id",
    "actor_id",
    "namespace",
    "memory_type",
    "subject",
    "content",
    "owner",
    "confidence",
    "source",
    "created_at",
    "last_accessed_at",
    "access_count",
    "last_verified_at",
    "expires_at",
    "retention_class",
    "status",
    "status_changed_at",
    "provenance",
    "content_sha256",
    "norm_sha256",
    "negated",
    "created_ts",
    "last_accessed_ts",
    "last_verified_ts",
    "expires_ts",
    "status_changed_ts",
)
_DERIVED = 7  # trailing columns derived from the record (not read back into it)
_SELECT = f"SELECT {', '.join(COLUMNS[:-_DERIVED])} FROM records"
# In PlanView order: rows become views with no per-field work (enums are StrEnums, so the
# planner compares them by value and plain strings from SQLite serve as they are).
_VIEW_COLUMNS = (
    "id", "actor_id", "namespace", "memory_type", "subject", "owner", "source", "created_ts",
    "last_accessed_ts", "access_count", "last_verified_ts", "expires_ts", "retention_class",
    "status", "status_changed_ts", "content_sha256", "norm_sha256", "negated", "confidence",
    "0",  # subject_inferred: inferred subjects live in a side table (group.py), merged later
)  # fmt: skip
_SELECT_VIEW = f"SELECT {', '.join(_VIEW_COLUMNS)} FROM records"
_row_id = itemgetter(0)  # a row's id (COLUMNS[0])


def _null(value: None) -> None:
    return value


# None binds as NULL either way. Without an adapter for it, sqlite3 (3.11) tries the
# adaptation protocol on every None it binds, paying a failed attribute lookup on the
# protocol type each time: a store row has ~6 Nones, and writing 100k demo rows took 21
# us of CPU a row without this and 15 with it (three alternations, BENCHMARKS.md). Not
# set over an adapter someone else registered.
if (type(None), sqlite3.PrepareProtocol) not in sqlite3.adapters:
    sqlite3.register_adapter(type(None), _null)

_INSERT = f"INSERT INTO records ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
_UPSERT = (
    f"INSERT INTO records ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))}) "
    "ON CONFLICT(id) DO UPDATE SET " + ", ".join(f"{c}=excluded.{c}" for c in COLUMNS if c != "id")
)

# online refresh: the row as read, only while it is still that row (active, unheld, same text)
# online remember's refresh of a duplicate: ONE statement that changes only what a refresh
# changes, each from the row as it is now (a concurrent writer's access count, expiry or
# subject is never written back from a stale read); the row must still be active, unheld
# and hold the text read. A lifetime change (memory_type, expires_at) also needs the row's
# lifetime as read (:relife = 0: none wanted); else nothing is written and the caller
# reads again. Times compare by their *_ts columns (seconds), never as text.
_LATER = (
    "CASE WHEN COALESCE({c}_ts, created_ts) >= :at_ts THEN COALESCE({c}_at, created_at) "
    "ELSE :at END"
)
_REFRESH = (
    "UPDATE records SET access_count = access_count + 1, "
    f"last_accessed_at = {_LATER.format(c='last_accessed')}, "
    "last_accessed_ts = MAX(COALESCE(last_accessed_ts, created_ts), :at_ts), "
    "confidence = MAX(confidence, :confidence), subject = COALESCE(subject, :subject), "
    f"last_verified_at = CASE WHEN :verify THEN {_LATER.format(c='last_verified')} "
    "ELSE last_verified_at END, "
    "last_verified_ts = CASE WHEN :verify THEN MAX(COALESCE(last_verified_ts, created_ts), "
    ":at_ts) ELSE last_verified_ts END, "
    "memory_type = CASE WHEN :relife THEN :memory_type ELSE memory_type END, "
    "expires_at = CASE WHEN :relife THEN :expires_at ELSE expires_at END, "
    "expires_ts = CASE WHEN :relife THEN :expires_ts ELSE expires_ts END "
    "WHERE id = :id AND status = 'active' AND retention_class != 'legal_hold' "
    "AND (:actor IS NULL OR (actor_id = :actor AND namespace = :namespace)) "
    "AND content_sha256 = :sha AND (NOT :relife OR (memory_type = :was_type "
    "AND (expires_at IS :was_expires_at OR expires_ts IS :was_expires_ts)))"
)

# 16 bits of a row's folded-text hash (its first 4 hex digits, as code points: SQLite has
# no hex parser) for the shard fingerprint: summed over a shard, a checksum that moves when
# a row's text changes to another of the same length (its rowid and length stay the same).
# 4 digits make the query ~3x slower (0.25 s on a 100k-row shard, run only after a
# foreign write); all 64 would make it ~15x.
_TEXT_SUM = " + ".join(f"unicode(substr(norm_sha256, {i + 1}, 1)) * {128**i}" for i in range(4))

_INSERT_IF_ABSENT = _INSERT + " ON CONFLICT(id) DO NOTHING"
# put_if_unchanged: the row as read (same text), only while nothing holds it
_OVERWRITE = (
    f"UPDATE records SET {', '.join(f'{c}=?' for c in COLUMNS[1:])} WHERE id=? "
    "AND content_sha256=? AND retention_class!='legal_hold' AND status!='retained'"
)

_SAME_TEXT = " AND content_sha256=?"
# a night's delete: the row still has the status and lifetime read (delete_many, _life)
_SAME_LIFE = " AND status=? AND memory_type=? AND created_ts=? AND expires_ts IS ?"


def _life(r: MemoryRecord) -> tuple[str, str, float, float | None]:
    """The values ``_SAME_LIFE`` compares, of the record as read."""
    expires = r.expires_at
    return (Status(r.status).value, MemoryType(r.memory_type).value, r.created_at.timestamp(),
            None if expires is None else expires.timestamp())  # fmt: skip


def _same_life(
    was: MemoryRecord, status: str, memory_type: str, created: str, expires: str | None
) -> bool:
    """Whether a row's status, type and times (as stored) are the record's as read, by value:
    ``_SAME_LIFE`` compares the seconds columns, which a row written by another tool or an
    older memlife may hold another way. A value that cannot be read is a change."""
    try:
        times = (_dt(created), _dt(expires))
    except (TypeError, ValueError):
        return False
    return (status, memory_type, *times) == (*_life(was)[:2], was.created_at, was.expires_at)


# a row still as an applier read it: the same actor, namespace, text, status and class
AS_READ = "actor_id=? AND namespace=? AND content_sha256=? AND status=? AND retention_class=?"
_OVERWRITE_AS_READ = (
    f"UPDATE records SET {', '.join(f'{c}=?' for c in COLUMNS[1:])} WHERE id=? AND {AS_READ}"
)


_MOVED = ("SCOPE_CHANGED", "STALE_PRECONDITION")  # what _changed names


def _changed(
    was: MemoryRecord, actor: str, namespace: str, sha: str | None,
    status: str | None = None, retention: str | None = None,
) -> str | None:  # fmt: skip
    """Why a row (its values now; None: not compared) is not the record as read, or None."""
    if (actor, namespace) != (was.actor_id, was.namespace):
        return "SCOPE_CHANGED"  # another actor's (or namespace's) record took the id
    read = as_read(was)
    if any(v is not None and v != r for v, r in zip((sha, status, retention), read[2:],
                                                    strict=True)):  # fmt: skip
        return "STALE_PRECONDITION"  # rewritten, forgotten or held since the read
    return None


def as_read(r: MemoryRecord) -> tuple[str, str, str, str, str]:
    """The values ``AS_READ`` compares, of the record as read."""
    return (r.actor_id, r.namespace, content_sha256(r.content), Status(r.status).value,
            RetentionClass(r.retention_class).value)  # fmt: skip


# set_retention: the class (and a status change) of the row as read, nothing else
_SET_RETENTION = (
    "UPDATE records SET retention_class=?, "
    "status_changed_at=CASE WHEN status=? THEN status_changed_at ELSE ? END, "
    "status_changed_ts=CASE WHEN status=? THEN status_changed_ts ELSE ? END, status=? "
    "WHERE id=? AND actor_id=? AND namespace=? AND retention_class=? AND status=?"
)

# an active record of the same actor + namespace holding the same folded text
_SAME_ACTIVE = (
    "SELECT id FROM records WHERE actor_id=? AND namespace=? AND norm_sha256=? "
    "AND status='active' LIMIT 1"
)
DUPLICATE_ACTIVE = "DUPLICATE_ACTIVE"
HELD = "HELD"
CHANGED = "CHANGED"


@dataclass(frozen=True)
class Refresh:
    """What a duplicate ``remember`` changes in the record it refreshes (refresh_active):
    one more access at ``at`` (recency never moved back), confidence raised to at least
    ``confidence``, a missing subject filled in, verified at ``at`` when ``verify``, and
    when ``memory_type`` is set, the lifetime: that type and ``expires_at``, written only
    while the row still has ``was_type`` and ``was_expires_at`` (the lifetime read)."""

    at: datetime
    confidence: float
    subject: str | None = None
    verify: bool = False
    memory_type: MemoryType | None = None
    expires_at: datetime | None = None
    was_type: MemoryType | None = None
    was_expires_at: datetime | None = None


_MT = {m.value: m for m in MemoryType}
_SRC = {s.value: s for s in Source}
_RC = {r.value: r for r in RetentionClass}
_ST = {s.value: s for s in Status}


def _ts(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _dt(value: str | None) -> datetime | None:
    if value is None:
        return None
    at = datetime.fromisoformat(value)
    # without a zone: a row written before session 26 (or by another tool) says UTC, as
    # memlife always meant; read as naive, export wrote lines import refuses and a night
    # ended comparing naive with aware times (audit 49h)
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def record_to_row(r: MemoryRecord) -> tuple[Any, ...]:
    # Hot at import (~100k rows/s wanted): enum members bind as their text (StrEnum is a
    # str), each timestamp is read once, the content is hashed once.
    content, prov = r.content, r.provenance
    sha = content_sha256(content)
    if prov.content_sha256 and prov.content_sha256 != sha:  # MemoryRecord.as_stored
        prov = r.as_stored().provenance
    created, accessed, verified = r.created_at, r.last_accessed_at, r.last_verified_at
    expires, changed = r.expires_at, r.status_changed_at
    return (
        r.id,
        r.actor_id,
        r.namespace,
        str.__str__(r.memory_type),
        r.subject,
        content,
        r.owner,
        r.confidence,
        str.__str__(r.source),
        created.isoformat(),
        None if accessed is None else accessed.isoformat(),
        r.access_count,
        None if verified is None else verified.isoformat(),
        None if expires is None else expires.isoformat(),
        str.__str__(r.retention_class),
        str.__str__(r.status),
        None if changed is None else changed.isoformat(),
        prov.model_dump_json(),
        sha,
        norm_sha256(content),
        int(negates(content)),
        created.timestamp(),
        None if accessed is None else accessed.timestamp(),
        None if verified is None else verified.timestamp(),
        None if expires is None else expires.timestamp(),
        None if changed is None else changed.timestamp(),
    )


def erased_again(record_id: str, sha: str) -> str:
    """The tombstone name of a second text erased under one record id (the id reused;
    ``tombstones.erased_id`` reads the id back). Taken too (an erased record's own id), the
    name is extended again, at most ERASED_AGAIN_MAX times."""
    return f"{record_id}#{sha[:16]}"


ERASED_AGAIN_MAX = 8
# the longest tombstone name: an id (256), "#recorded", and each name taken extended once
TOMBSTONE_NAME_MAX = 256 + len("#recorded") + ERASED_AGAIN_MAX * 17


def tombstone_norm(content: str) -> str | None:
    """The folded-text hash a tombstone matches on; None for text that folds to nothing."""
    return norm_sha256(content) if normalise(content) else None


def tombstone_norms(content: str) -> list[str]:
    """Every folded-text hash a tombstone may hold for ``content``: today's, the one a
    tombstone written at store version 4 holds (a decimal point opening a number dropped),
    at version 3 (a sign after a letter or standing alone dropped), and the one written
    before version 3 (signs and symbols dropped)."""
    keys = [tombstone_norm(content)]
    if "." in content and normalise(content, fold=FOLD_LEADING_POINT):  # 5: '1.5' was '1 5'
        keys.append(v5_norm_sha256(content))
    if "." in content and normalise(content, fold=FOLD_SIGNS):  # version 4: '.5' was '5'
        keys.append(v4_norm_sha256(content))
    if normalise(content, fold=FOLD_SIGNED_NUMBERS):
        keys.append(v3_norm_sha256(content))
    if normalise(content, fold=FOLD_NO_SYMBOLS):
        keys.append(legacy_norm_sha256(content))
    return list(dict.fromkeys(k for k in keys if k))


_RECORD_FIELDS = set(MemoryRecord.model_fields)
_PROV_FIELDS = set(Provenance.model_fields)


M = TypeVar("M", bound=BaseModel)


def _trusted(cls: type[M], fields: dict[str, Any], names: set[str]) -> M:
    """Build a pydantic model from already-validated data, ~10x cheaper than model_construct."""
    obj = object.__new__(cls)  # pydantic models define no __new__ of their own
    object.__setattr__(obj, "__dict__", fields)
    object.__setattr__(obj, "__pydantic_fields_set__", names)
    object.__setattr__(obj, "__pydantic_extra__", None)
    object.__setattr__(obj, "__pydantic_private__", None)
    return obj


def row_to_record(row: tuple[Any, ...]) -> MemoryRecord:
    """A stored row as a record, unchecked (the hot path); a value it cannot read (a damaged
    file, a hand-written row) is a CorruptRecordError naming the record and field."""
    try:
        return _row_to_record(row)
    except (KeyError, TypeError, ValueError):  # JSONDecodeError is a ValueError
        raise corrupt_record(row) from None


def _row_to_record(row: tuple[Any, ...]) -> MemoryRecord:
    if type(row[5]) is not str:  # content every reader embeds, hashes and prints: text only
        raise TypeError
    raw = json.loads(row[17])
    # every key, as written since the first version: trusted; else (a row from elsewhere,
    # a key missing) validated, defaults filled, anything wrong a ValueError
    fits = isinstance(raw, dict) and raw.keys() == _PROV_FIELDS
    prov = _trusted(Provenance, raw, _PROV_FIELDS) if fits else Provenance.model_validate(raw)
    return _trusted(
        MemoryRecord,
        dict(
            id=row[0],
            actor_id=row[1],
            namespace=row[2],
            memory_type=_MT[row[3]],
            subject=row[4],
            content=row[5],
            owner=row[6],
            confidence=row[7],
            source=_SRC[row[8]],
            created_at=_dt(row[9]),
            last_accessed_at=_dt(row[10]),
            access_count=row[11],
            last_verified_at=_dt(row[12]),
            expires_at=_dt(row[13]),
            retention_class=_RC[row[14]],
            status=_ST[row[15]],
            status_changed_at=_dt(row[16]),
            provenance=prov,
        ),
        _RECORD_FIELDS,
    )


row_to_view = PlanView._make  # the SELECT is in PlanView's field order


def _encode_token(actor_id: str, namespace: str, last_id: str) -> str:
    raw = json.dumps([actor_id, namespace, last_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_token(token: str, actor_id: str, namespace: str) -> str:
    try:
        actor, ns, last_id = json.loads(base64.urlsafe_b64decode(token.encode()))
    except Exception:
        raise BadPageToken("page token is not a token of this store") from None
    if not isinstance(last_id, str):
        raise BadPageToken("page token is not a token of this store")
    if (actor, ns) != (actor_id, namespace):
        raise BadPageToken("page token belongs to another actor/namespace")
    return last_id


# The erased record itself under an older text (an export from before its last update,
# restored): its id was erased, and it was created before that erasure. A record that
# takes the id afterwards is created after it and is a new record (ids may be reused).
# The id's tombstones under every name: an id reused and erased again keeps its second
# tombstone under erased_again's name ("m-1#<sha>"), read too (audit 49r1).
_ERASED_BEFORE = (
    "SELECT record_id, content_sha256, erased_at FROM tombstones WHERE actor_id=? "
    "AND (record_id=? OR record_id>=? || '#' AND record_id<? || '$')"
)


def erased_before_args(r: MemoryRecord) -> tuple[str, str, str]:
    """(actor, id, created_at in UTC as tombstones write erased_at) for _ERASED_BEFORE."""
    return r.actor_id, r.id, r.created_at.astimezone(UTC).isoformat()


def erased_id(name: str, sha: str, names: set[str]) -> str:
    """The record id a tombstone name stands for. Ours add '#recorded' (a record's second
    hash: tombstones.rows_for) or erased_again's '#<16 hex>' (a second text under one id),
    always beside a tombstone of the base name; an id that holds '#' itself ("m#a", which
    the importer accepts) is its own."""
    for _ in range(ERASED_AGAIN_MAX + 1):  # '#recorded', then each name taken, at most
        base, sep, tail = name.rpartition("#")
        if not sep or base not in names:
            return name
        if tail != "recorded" and name != erased_again(base, sha):
            return name
        name = base
    return name


def erased_since(record_id: str, created: str, rows: Sequence[tuple[str, str, str]]) -> bool:
    """Whether a tombstone of ``record_id`` (rows: name, sha, erased_at of its names and
    the names that start with it and '#') was written at or after ``created``."""
    names = {name for name, _, _ in rows}
    return any(at >= created and erased_id(name, sha, names) == record_id
               for name, sha, at in rows)  # fmt: skip


# Tables memlife keeps in a store's file (the store's own, and the journal, caches and side
# tables that share it), each with columns every memlife version gave it: a file holding
# tables, none of them these, is another application's database, never opened as a store
# (audit 51h); so is one whose table only bears one of these names (`operations`, `secrets`,
# `records`...: names any application uses), which opened it as a store (audit 51r2).
OWN_TABLES: dict[str, frozenset[str]] = {name: frozenset(cols.split()) for name, cols in {
    "records": "id actor_id namespace content status provenance",
    "tombstones": "actor_id record_id content_sha256 erased_at",
    "operations": "operation_id", "secrets": "name value", "leases": "name owner run_id",
    "consolidation_rejections": "group_key actor_id namespace",
    "consolidation_outcomes": "memo_key actor_id namespace",
    "model_answers": "digest actor_id namespace output",
    "quarantine_snapshots": "record_id status provenance",
    "pending_erasures": "record_id actor_id", "review_items": "item_id record_id",
    "inferred_subjects": "record_id actor_id subject",
    "embeddings": "content_sha256 model_id vector", "derived": "actor_id namespace kind digest",
}.items()}  # fmt: skip


def _not_a_store(path: Path, exc: sqlite3.DatabaseError) -> NotAStoreError | sqlite3.DatabaseError:
    """A file SQLite cannot read as a database (SQLITE_NOTADB, SQLITE_CORRUPT) as a
    StoreError naming it; a lock, a full disk or a read-only file stay as they are."""
    if isinstance(exc, sqlite3.OperationalError):
        return exc
    return NotAStoreError(
        f"store {path}: not a SQLite file, or a damaged one ({exc}); refused before any "
        "write: check the path, or restore the file from a backup"
    )


def _damaged(
    path: Path, exc: sqlite3.DatabaseError, actor_id: str, namespace: str
) -> NotAStoreError | sqlite3.DatabaseError:
    """A page SQLite cannot read, found paging a shard (damage past the pages opening the
    file reads: a copy torn by a checkpoint, a bad disk), as a StoreError naming the file and
    the shard: that shard stops and the night goes on, export exits 2. A bare DatabaseError
    ended the night for every tenant, and export, naming nothing (audit 53h). A lock or a
    full disk stays as it is."""
    if isinstance(exc, sqlite3.OperationalError):
        return exc
    return NotAStoreError(
        f"store {path}: damaged ({exc}) where actor {actor_id!r}, namespace {namespace!r} "
        "is kept: restore the file from a backup (PRAGMA integrity_check lists the damage)"
    )


def _refuse_foreign(path: Path) -> None:
    """Refuse, before any write, a file that is not a memlife store: one SQLite cannot read,
    and another application's database (tables, none of them ours). Opening such a file
    switched it to WAL, added memlife's tables and overwrote its own ``user_version``
    (`memlife export --store` of a mistyped path exited 0 having done so)."""
    try:
        tables = existing_tables(path)
    except sqlite3.DatabaseError as exc:
        raise _not_a_store(path, exc) from None
    if not tables:
        return
    if not tables.keys() & OWN_TABLES.keys():
        raise NotAStoreError(
            f"store {path}: a SQLite file of another application ({len(tables)} tables, no "
            "memlife table); refused before any write: check the path"
        )
    for name in sorted(tables.keys() & OWN_TABLES.keys()):
        if not OWN_TABLES[name] <= tables[name]:
            raise NotAStoreError(
                f"store {path}: a SQLite file of another application (its table '{name}' "
                "is not memlife's); refused before any write: check the path"
            )


class SqliteStore:
    """MemoryStore over a SQLite file. Thread-safe: one connection behind a lock."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.url = f"sqlite:///{self.path}"
        self.lock = threading.RLock()
        _refuse_foreign(self.path)  # before the WAL switch: the first write to a file
        try:
            self.connection = connect_wal(self.path)
        except sqlite3.DatabaseError as exc:
            raise _not_a_store(self.path, exc) from None
        c = self.connection
        c.execute("PRAGMA synchronous=NORMAL")
        c.execute("PRAGMA secure_delete=ON")  # erased content is zeroed, not left in free pages
        c.execute("PRAGMA busy_timeout=30000")
        if (found := c.execute("PRAGMA user_version").fetchone()[0]) > STORE_VERSION:
            c.close()  # its keys are another fold's: this memlife's writes would mix them in
            raise StoreError(
                f"store {self.path}: version {found} was written by a newer memlife (this one "
                f"reads up to version {STORE_VERSION}); refused before any write: upgrade memlife"
            )
        try:
            c.executescript(SCHEMA)
            self._upgrade()
        except sqlite3.DatabaseError as exc:  # damaged past its first pages: named, closed
            c.close()
            raise _not_a_store(self.path, exc) from None

    def _upgrade(self) -> None:
        """Bring an older file's derived columns up to :data:`STORE_VERSION`, once.

        A file at the version costs one pragma read. Else the rows are recomputed in
        batches, each its own write transaction (BEGIN IMMEDIATE) that reads and rewrites
        its rows, so no writer waits on more than one batch (a large store takes seconds)
        and every batch is idempotent: two processes opening the file at once may both
        work through it and write the same keys; the version, set last, says it is done.
        A file that cannot be written (read-only) is read as it is.
        """
        c = self.connection
        if c.execute("PRAGMA user_version").fetchone()[0] >= STORE_VERSION:
            return
        try:
            after: int | None = 0
            while after is not None:
                with self.lock, self.transaction():
                    if c.execute("PRAGMA user_version").fetchone()[0] >= STORE_VERSION:
                        break  # another process finished it meanwhile
                    after = _refold(c, after)
            with self.lock, self.transaction():
                if c.execute("PRAGMA user_version").fetchone()[0] < STORE_VERSION:
                    c.execute(f"PRAGMA user_version={STORE_VERSION}")
        except sqlite3.OperationalError as exc:
            if "readonly" not in str(exc):
                raise

    # -- reads ---------------------------------------------------------------------------
    def list_actors(self) -> Iterator[str]:
        with self.lock:
            rows = self.connection.execute(
                "SELECT DISTINCT actor_id FROM records ORDER BY actor_id"
            ).fetchall()
        return iter([r[0] for r in rows])

    def list_namespaces(self, actor_id: str) -> list[str]:
        with self.lock:
            rows = self.connection.execute(
                "SELECT DISTINCT namespace FROM records WHERE actor_id=? ORDER BY namespace",
                (actor_id,),
            ).fetchall()
        return [r[0] for r in rows]

    def _keyset(
        self,
        select: str,
        actor_id: str,
        namespace: str,
        page_size: int,
        token: str | None,
        statuses: Sequence[Status] | None = None,
    ) -> tuple[list[tuple[Any, ...]], str | None]:
        """One keyset page of rows (ordered by id) and the token of the next, if any."""
        if page_size < 1:
            raise ValueError("page_size must be >= 1")
        after = _decode_token(token, actor_id, namespace) if token else ""
        sql = f"{select} WHERE actor_id=? AND namespace=? AND id>?"
        args: list[Any] = [actor_id, namespace, after]
        if statuses:
            sql += f" AND status IN ({marks(len(statuses))})"
            args += [Status(s).value for s in statuses]
        sql += " ORDER BY id LIMIT ?"
        args.append(page_size + 1)  # one extra row tells whether another page exists
        with self.lock:
            try:
                rows = self.connection.execute(sql, args).fetchall()
            except sqlite3.DatabaseError as exc:
                raise _damaged(self.path, exc, actor_id, namespace) from None
        if len(rows) <= page_size:
            return rows, None
        rows = rows[:page_size]
        if type(rows[-1][0]) is not str:  # an id another tool wrote as bytes sorts last: a
            # token cannot hold it (json.dumps' bare TypeError ended the night, audit 51h)
            raise corrupt_field(rows[-1][0], "id")
        return rows, _encode_token(actor_id, namespace, rows[-1][0])

    def page(
        self,
        actor_id: str,
        namespace: str,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        token: str | None = None,
        statuses: Sequence[Status] | None = None,
    ) -> Page:
        rows, nxt = self._keyset(_SELECT, actor_id, namespace, page_size, token, statuses)
        return Page([row_to_record(r) for r in rows], nxt)

    def page_views(
        self,
        actor_id: str,
        namespace: str,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        token: str | None = None,
    ) -> tuple[list[PlanView], str | None]:
        """Like :meth:`page`, but content-free planning views built without pydantic (fast path)."""
        rows, nxt = self._keyset(_SELECT_VIEW, actor_id, namespace, page_size, token)
        return list(map(row_to_view, rows)), nxt

    def corrupt_row(self, actor_id: str, namespace: str) -> CorruptRecordError | None:
        """The first stored row of the shard whose value planning cannot read (a row written
        by hand, a damaged file), as an error naming the record and field; None if none.
        Looked for only after planning the shard failed (sqlite_rows.py): free otherwise."""
        token: str | None = None
        while True:
            try:
                rows, token = self._keyset(_SELECT_VIEW, actor_id, namespace, 1000, token)
                checked(rows, VIEW_CHECKS)
            except CorruptRecordError as exc:
                return exc
            if token is None:
                return None

    def get(self, record_id: str) -> MemoryRecord | None:
        with self.lock:
            row = self.connection.execute(f"{_SELECT} WHERE id=?", (record_id,)).fetchone()
        return row_to_record(row) if row else None

    def get_many(self, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        out: dict[str, MemoryRecord] = {}
        with self.lock:
            for qs, chunk in in_chunks(ids):
                for row in self.connection.execute(f"{_SELECT} WHERE id IN ({qs})", chunk):
                    out[row[0]] = row_to_record(row)
        return out

    def links_many(self, ids: Sequence[str]) -> dict[str, Link]:
        """Hold and replacement links of these records (memlife/pinned.py): three columns,
        no content, no record built."""
        out: dict[str, Link] = {}
        q = "SELECT id, retention_class, status, provenance FROM records WHERE id IN ({})"
        with self.lock:
            for qs, chunk in in_chunks(ids):
                for rid, retention, status, raw in self.connection.execute(q.format(qs), chunk):
                    held = is_held(retention, status)
                    try:
                        if '"replaced_by":null' in raw and '"supersedes":[]' in raw:
                            out[rid] = Link(held, None, ())  # most records: nothing to parse
                            continue
                        prov = json.loads(raw)
                        by, sources = prov.get("replaced_by"), tuple(prov.get("supersedes") or ())
                    except (AttributeError, TypeError, ValueError):  # a damaged row: its
                        # shard stops naming it (planning reads links; a bare JSON error
                        # ended every tenant's night)
                        raise corrupt_field(rid, "provenance") from None
                    out[rid] = Link(held, by, sources)
        return out

    def held_superseded_ids(self, actor_id: str) -> list[str]:
        """Ids of the actor's superseded records under legal hold, every namespace
        (memlife/pinned.py): the records whose replacements a hold pins, read through the
        status index."""
        q = "SELECT id FROM records WHERE actor_id=? AND status=? AND retention_class=?"
        args = (actor_id, Status.superseded.value, RetentionClass.legal_hold.value)
        with self.lock:
            return [rid for (rid,) in self.connection.execute(q, args)]

    def superseded_pointing_to(self, actor_id: str, ids: Sequence[str]) -> dict[str, str]:
        """The actor's superseded and quarantined records (every namespace) whose
        ``replaced_by`` is one of ``ids``: record id -> the one it names (memlife/orphans.py).
        Read through the status index; no content."""
        out: dict[str, str] = {}
        q = (
            "SELECT id, json_extract(provenance, '$.replaced_by') FROM records "
            "WHERE actor_id=? AND status IN (?, ?) "
            "AND json_extract(provenance, '$.replaced_by') IN ({})"
        )
        statuses = (Status.superseded.value, Status.quarantined.value)
        with self.lock:
            for qs, chunk in in_chunks(ids):
                try:
                    rows = self.connection.execute(q.format(qs), [actor_id, *statuses, *chunk])
                    out.update((rid, by) for rid, by in rows)
                except sqlite3.OperationalError:  # "malformed JSON": name the damaged row
                    bad = self.connection.execute(
                        "SELECT id FROM records WHERE actor_id=? AND status IN (?, ?) "
                        "AND NOT json_valid(provenance) LIMIT 1", (actor_id, *statuses),
                    ).fetchone()  # fmt: skip
                    if bad is None:
                        raise
                    raise corrupt_field(bad[0], "provenance") from None
        return out

    def count(self, statuses: Sequence[Status] | None = None) -> int:
        sql, args = "SELECT count(*) FROM records", []
        if statuses:
            sql += f" WHERE status IN ({marks(len(statuses))})"
            args = [Status(s).value for s in statuses]
        with self.lock:
            n: int = self.connection.execute(sql, args).fetchone()[0]
        return n

    def iter_all(self, batch: int = 1000) -> Iterator[MemoryRecord]:
        """Every record in (actor, namespace, id) order, streamed (export)."""
        for actor in self.list_actors():
            for ns in self.list_namespaces(actor):
                token = None
                while True:
                    page = self.page(actor, ns, page_size=batch, token=token)
                    yield from page.records
                    if page.next_token is None:
                        break
                    token = page.next_token

    # -- writes --------------------------------------------------------------------------
    def put_many(self, records: Sequence[MemoryRecord]) -> BatchResult:
        rows = [record_to_row(r) for r in records]
        with self.lock, self.transaction():
            self.connection.executemany(_UPSERT, rows)
        return BatchResult(succeeded=[r.id for r in records])

    def refresh_active(
        self,
        record_id: str,
        expected_sha256: str,
        change: Refresh,
        scope: tuple[str, str] | None = None,
    ) -> bool:
        """Apply ``change`` (online remember's refresh of a duplicate) to the row in ONE
        statement, only if that row is still active, not held and holds ``expected_sha256``
        (and, for a lifetime change, still has the lifetime read): a record deleted, erased,
        superseded or held since it was read is not brought back, and what another writer
        changed meanwhile (access count, expiry) is never reverted. ``scope`` (actor,
        namespace): only while the row is still there (an id another actor's record took
        over is not that record). False: not written."""
        at = change.at
        was = change.was_expires_at
        params = {
            "id": record_id,
            "sha": expected_sha256,
            "actor": None if scope is None else scope[0],
            "namespace": None if scope is None else scope[1],
            "at": at.isoformat(),
            "at_ts": at.timestamp(),
            "confidence": change.confidence,
            "subject": change.subject,
            "verify": int(change.verify),
            "relife": int(change.memory_type is not None),
            "memory_type": None if change.memory_type is None else change.memory_type.value,
            "expires_at": _ts(change.expires_at),
            "expires_ts": None if change.expires_at is None else change.expires_at.timestamp(),
            "was_type": None if change.was_type is None else change.was_type.value,
            "was_expires_at": _ts(was),
            "was_expires_ts": None if was is None else was.timestamp(),
        }
        with self.lock, self.transaction():
            cur = self.connection.execute(_REFRESH, params)
        return cur.rowcount == 1

    def set_retention(
        self,
        was: MemoryRecord,
        retention_class: RetentionClass,
        *,
        status: Status | None = None,
        at: datetime | None = None,
    ) -> bool:
        """Give the record ``was`` names this retention class (and ``status``, changed
        ``at``) in ONE statement, only while its row is still as read: the same actor and
        namespace, retention class and status. Nothing else in the row is written, so what
        another writer changed since the read (its text, its reads) stays, and a record
        forgotten, held, released or taken over by another actor since then is left alone
        (the legal hold and its release; they wrote the whole record read back). False: not
        written (read it again)."""
        when = at or utcnow()
        new_status = (status or was.status).value
        params = (
            retention_class.value, new_status, _ts(when), new_status, when.timestamp(),
            new_status, was.id, was.actor_id, was.namespace, was.retention_class.value,
            was.status.value,
        )  # fmt: skip
        with self.lock, self.transaction():
            cur = self.connection.execute(_SET_RETENTION, params)
        return cur.rowcount == 1

    # its writes take ``expect`` / put_as_read: checked against the row as read, in the
    # write's own transaction (apply/appliers/base.py as_read)
    writes_as_read = True

    def put_as_read(self, record: MemoryRecord, was: MemoryRecord) -> bool:
        """Overwrite ``was``'s row with ``record`` in ONE statement, only while the row is
        still as read (``AS_READ``: actor, namespace, text, status, class): a record another
        actor's took the id of, rewritten, forgotten or held since the read is left alone
        (the review's stamp, a restore, an import's update). False: not written."""
        row = record_to_row(record)
        with self.lock, self.transaction():
            cur = self.connection.execute(_OVERWRITE_AS_READ, (*row[1:], row[0], *as_read(was)))
        return cur.rowcount == 1

    def verify_as_read(self, was: MemoryRecord, at: datetime) -> bool:
        """Mark ``was``'s record verified ``at`` in ONE statement, only while its row is
        still as read (``AS_READ``). Nothing else in the row is written: a reviewer's verify
        wrote the whole record read back, so a duplicate ``remember`` refreshing it in
        between (its read, confidence, lifetime) was undone; and a later verification is
        not moved back (as ``refresh_active``). False: not written (read it again)."""
        ts = at.timestamp()
        with self.lock, self.transaction():
            cur = self.connection.execute(
                "UPDATE records SET last_verified_at=CASE WHEN last_verified_ts > ? "
                "THEN last_verified_at ELSE ? END, "
                f"last_verified_ts=MAX(COALESCE(last_verified_ts, ?), ?) WHERE id=? AND {AS_READ}",
                (ts, at.isoformat(), ts, ts, was.id, *as_read(was)),
            )
        return cur.rowcount == 1

    def put_if_unchanged(self, record: MemoryRecord, expected_sha256: str | None) -> BatchResult:
        """Write ``record`` in ONE transaction, tombstones checked inside it: insert it when
        ``expected_sha256`` is None (the id was absent when read), else overwrite its row only
        while that row is not held and still holds ``expected_sha256``. A read-check-write
        (the LangGraph put) thus never overwrites a hold or brings back an erasure that
        committed after its read. Failures: ERASED_CONTENT / ERASED_SOURCE, HELD, CHANGED
        (the row is not as read: read again and retry)."""
        row = record_to_row(record)
        with self.lock, self.transaction():
            con = self.connection
            code = self._tombstone_refusal(record, record.provenance.supersedes)
            if code is None and expected_sha256 is None:
                if not con.execute(_INSERT_IF_ABSENT, row).rowcount:
                    code = CHANGED  # created by someone else since the read
            elif code is None:
                if not con.execute(_OVERWRITE, (*row[1:], row[0], expected_sha256)).rowcount:
                    now = con.execute(
                        "SELECT retention_class, status FROM records WHERE id=?", (record.id,)
                    ).fetchone()
                    held = now is not None and (now[0] == "legal_hold" or now[1] == "retained")
                    code = HELD if held else CHANGED
        if code is not None:
            return BatchResult(failed=[ItemFailure(record.id, code, retryable=code == CHANGED)])
        return BatchResult(succeeded=[record.id])

    def set_status(
        self,
        ids: Sequence[str],
        status: Status,
        *,
        replaced_by: str | None = None,
        policy_version: str | None = None,
        at: datetime | None = None,
        expect: Mapping[str, MemoryRecord] | None = None,
    ) -> BatchResult:
        return self._set_status(
            ids, status, replaced_by, policy_version, at, unless_held=False, expect=expect
        )

    def set_status_unless_held(
        self,
        ids: Sequence[str],
        status: Status,
        *,
        replaced_by: str | None = None,
        policy_version: str | None = None,
        at: datetime | None = None,
        actor: str | None = None,
        expect: Mapping[str, MemoryRecord] | None = None,
        together: bool = False,
    ) -> BatchResult:
        """:meth:`set_status`, refusing (LEGAL_HOLD) a record that is held when it is written:
        the check and the write share one transaction, so a hold placed after the caller
        read the record still wins (online ``forget``, LangGraph ``delete``, the nightly
        supersede and quarantine). ``actor``: a row of another actor counts as missing, in
        the same transaction (an id another actor's record took over since the read).
        ``expect`` (id -> the record as the caller read it): a row no longer as read
        (``AS_READ``) is not written, SCOPE_CHANGED or STALE_PRECONDITION (an applier's
        read and write, with writers that take no lease in between). ``together``: one row
        no longer as read writes none of them (a group's supersedes: memlife/apply/appliers/
        status.py), only the rows that moved are named."""
        return self._set_status(
            ids, status, replaced_by, policy_version, at, unless_held=True, actor=actor,
            expect=expect, together=together,
        )  # fmt: skip

    def _set_status(
        self,
        ids: Sequence[str],
        status: Status,
        replaced_by: str | None,
        policy_version: str | None,
        at: datetime | None,
        *,
        unless_held: bool,
        actor: str | None = None,
        expect: Mapping[str, MemoryRecord] | None = None,
        together: bool = False,
    ) -> BatchResult:
        result = BatchResult()
        writes: list[tuple[str, dict[str, Any]]] = []
        with self.lock, self.transaction():
            for rid in ids:
                row = self.connection.execute(
                    "SELECT provenance, retention_class, status, actor_id, namespace, "
                    "content_sha256 FROM records WHERE id=?",
                    (rid,),
                ).fetchone()
                if row is None or (actor is not None and row[3] != actor):
                    result.missing.append(rid)
                    continue
                if unless_held and (
                    row[1] == RetentionClass.legal_hold.value or row[2] == Status.retained.value
                ):
                    result.failed.append(ItemFailure(rid, "LEGAL_HOLD", retryable=False))
                    continue
                was = expect.get(rid) if expect is not None else None
                if was is not None and (changed := _changed(was, row[3], row[4], row[5],
                                                            row[2], row[1])):  # fmt: skip
                    result.failed.append(ItemFailure(rid, changed, retryable=False))
                    continue
                writes.append((rid, json.loads(row[0])))
            if together and any(f.code in _MOVED for f in result.failed):
                return result  # checked and written in one transaction: none written
            when = at or utcnow()
            for rid, prov in writes:
                if replaced_by is not None or status is not Status.superseded:
                    prov["replaced_by"] = replaced_by
                if policy_version is not None:
                    prov["policy_version"] = policy_version
                self.connection.execute(
                    "UPDATE records SET status=?, status_changed_at=?, status_changed_ts=?, "
                    "provenance=? WHERE id=?",
                    (Status(status).value, _ts(when), when.timestamp(), json.dumps(prov), rid),
                )
                result.succeeded.append(rid)
        return result

    def contents_held(
        self, actor_id: str, shas: Collection[str], excluding: Collection[str] = ()
    ) -> set[str]:
        """Which of these content hashes a record of the actor (not one of ``excluding``,
        the records about to go) holds, any status: their vector stays for it."""
        out: set[str] = set()
        with self.lock:
            for qs, chunk in in_chunks(sorted(shas)):
                q = (
                    "SELECT id, content_sha256 FROM records "
                    f"WHERE actor_id = ? AND content_sha256 IN ({qs})"
                )
                rows = self.connection.execute(q, [actor_id, *chunk])
                out |= {sha for rid, sha in rows if rid not in excluding}
        return out

    def delete_many(
        self,
        ids: Sequence[str],
        *,
        expect: Mapping[str, MemoryRecord] | None = None,
        any_text: bool = False,
    ) -> BatchResult:
        """Delete by id, never a held record: the hold is part of the DELETE, so one placed
        after the caller last read the record still wins (``LEGAL_HOLD``, not retried).
        ``expect`` (id -> the record as read): only while the row keeps its actor, namespace
        and (unless ``any_text``: an erasure) text, else SCOPE_CHANGED / STALE_PRECONDITION:
        an id another actor's record took over, or a text rewritten since, is not deleted.
        Without ``any_text`` (a night's delete or purge) also only while the row keeps the
        status and lifetime read (STALE_PRECONDITION): an agent that wrote the item again
        after the applier's read (active again, a new deadline) keeps its write (audit 53h)."""
        result = BatchResult()
        held = (RetentionClass.legal_hold.value, Status.retained.value)
        plain = "DELETE FROM records WHERE id=? AND retention_class!=? AND status!=?"
        scoped = plain + " AND actor_id=? AND namespace=?" + ("" if any_text else _SAME_TEXT)
        as_was = scoped + ("" if any_text else _SAME_LIFE)
        with self.lock, self.transaction():
            for rid in ids:
                was = expect.get(rid) if expect is not None else None
                if was is None:
                    cur = self.connection.execute(plain, (rid, *held))
                else:  # one statement on the common path; why not, only when it deleted none
                    text = () if any_text else (content_sha256(was.content),)
                    life = () if any_text else _life(was)
                    cur = self.connection.execute(
                        as_was, (rid, *held, was.actor_id, was.namespace, *text, *life)
                    )
                if cur.rowcount:
                    result.succeeded.append(rid)
                    continue
                # deleted none: gone, moved, rewritten or written again since the read, or held
                now = self.connection.execute(
                    "SELECT actor_id, namespace, content_sha256, retention_class, status, "
                    "memory_type, created_at, expires_at FROM records WHERE id=?", (rid,)
                ).fetchone()  # fmt: skip
                if now is None:
                    result.missing.append(rid)
                    continue
                changed = None if was is None else _changed(
                    was, now[0], now[1], None if any_text else now[2]
                )  # fmt: skip
                if changed is None and was is not None and not any_text and not is_held(
                    now[3], now[4]
                ):  # fmt: skip
                    if not _same_life(was, *now[4:]):
                        changed = "STALE_PRECONDITION"  # active again, or another deadline
                    else:  # the same values stored another way (a row of an older memlife)
                        args = (rid, *held, was.actor_id, was.namespace, *text)
                        if self.connection.execute(scoped, args).rowcount:
                            result.succeeded.append(rid)
                            continue
                result.failed.append(ItemFailure(rid, changed or "LEGAL_HOLD", retryable=False))
        return result

    # -- tombstones (erasure) --------------------------------------------------------------
    def add_tombstones(self, rows: Sequence[tuple[str, str, str, str | None]]) -> int:
        """(actor_id, record_id, content_sha256, norm_sha256) rows; idempotent. An id the
        actor reused and had erased again keeps both texts out: the second tombstone goes
        under ``erased_again(id, sha)`` (the table's key is the actor and the id)."""
        at = utcnow().isoformat()
        insert = "INSERT OR IGNORE INTO tombstones VALUES (?, ?, ?, ?, ?)"
        held = "SELECT content_sha256 FROM tombstones WHERE actor_id=? AND record_id=?"
        new = 0
        with self.lock, self.transaction():
            for actor, rid, sha, norm in rows:
                name = rid
                for _ in range(ERASED_AGAIN_MAX):  # a name taken by another text: the next
                    if self.connection.execute(insert, (actor, name, sha, norm, at)).rowcount:
                        new += 1
                        break
                    if self.connection.execute(held, (actor, name)).fetchone()[0] == sha:
                        break  # this very tombstone: idempotent
                    name = erased_again(name, sha)
        return new

    def tombstones(self, actor_id: str | None = None) -> list[dict[str, str | None]]:
        sql = "SELECT actor_id, record_id, content_sha256, norm_sha256, erased_at FROM tombstones"
        args: tuple[str, ...] = ()
        if actor_id is not None:
            sql, args = sql + " WHERE actor_id=?", (actor_id,)
        keys = ("actor_id", "record_id", "content_sha256", "norm_sha256", "erased_at")
        with self.lock:
            rows = self.connection.execute(sql + " ORDER BY actor_id, record_id", args).fetchall()
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def tombstone_refusal(self, r: MemoryRecord, sources: Sequence[str] = ()) -> str | None:
        """ERASED_CONTENT / ERASED_SOURCE when a tombstone forbids writing ``r``, else None."""
        with self.lock:  # re-entrant: also called inside put_replacement's transaction
            return self._tombstone_refusal(r, sources)

    def _erased_before(self, r: MemoryRecord) -> bool:
        actor, rid, created = erased_before_args(r)
        rows = self.connection.execute(_ERASED_BEFORE, (actor, rid, rid, rid)).fetchall()
        return erased_since(rid, created, rows)

    def _tombstone_refusal(self, r: MemoryRecord, sources: Sequence[str]) -> str | None:
        sha = r.provenance.content_sha256 or content_sha256(r.content)
        norms: list[str | None] = [*tombstone_norms(r.content)] or [None]
        hit = self.connection.execute(
            "SELECT 1 FROM tombstones WHERE actor_id=? AND content_sha256 IN (?, ?) "
            f"OR actor_id=? AND norm_sha256 IN ({marks(len(norms))}) LIMIT 1",
            (r.actor_id, sha, content_sha256(r.content), r.actor_id, *norms),
        ).fetchone()
        if hit or self._erased_before(r):
            return "ERASED_CONTENT"
        # the writer's own actor: an id another actor's erasure freed may be taken again; an
        # id the actor itself reused since is a source when its record holds a text no
        # tombstone names (the erased record is gone: a live one under the id with the
        # erased text is that record between the tombstone and its delete)
        for qs, chunk in in_chunks(sources):
            q = (f"SELECT 1 FROM tombstones t WHERE t.actor_id=? AND t.record_id IN ({qs}) "
                 "AND NOT EXISTS (SELECT 1 FROM records r WHERE r.id=t.record_id "
                 "AND r.actor_id=t.actor_id AND r.content_sha256 NOT IN "
                 "(SELECT content_sha256 FROM tombstones WHERE actor_id=t.actor_id)) LIMIT 1")  # fmt: skip
            if self.connection.execute(q, [r.actor_id, *chunk]).fetchone():
                return "ERASED_SOURCE"
        return None

    def put_replacement(self, record: MemoryRecord) -> BatchResult:
        """Write a consolidation replacement unless a tombstone forbids it, in ONE transaction.

        An erasure commits its tombstones before it selects derived records, so a
        replacement is either visible to that selection or refused here: never both missed.
        A row already under its id is overwritten only while it is the same actor's and
        namespace's and not held (a crashed attempt's own write): another actor's record
        that took the id is SCOPE_CHANGED, a held one LEGAL_HOLD, both in this transaction.
        """
        with self.lock, self.transaction():
            code = self.tombstone_refusal(record, record.provenance.supersedes)
            now = self.connection.execute(
                "SELECT actor_id, namespace, retention_class, status FROM records WHERE id=?",
                (record.id,),
            ).fetchone()
            if code is None and now is not None:
                if (now[0], now[1]) != (record.actor_id, record.namespace):
                    code = "SCOPE_CHANGED"
                elif now[2] == RetentionClass.legal_hold.value or now[3] == Status.retained.value:
                    code = "LEGAL_HOLD"
            if code is None:
                self.connection.execute(_UPSERT, record_to_row(record))
        if code is not None:
            why = "tombstoned" if code.startswith("ERASED") else "the id's row is not ours"
            return BatchResult(failed=[ItemFailure(record.id, code, why, retryable=False)])
        return BatchResult(succeeded=[record.id])

    def insert_new(
        self,
        records: Sequence[MemoryRecord],
        *,
        check_tombstones: bool = True,
        unique_active: bool = False,
        seen_version: tuple[int, int] | None = None,
    ) -> BatchResult:
        """Insert records whose id is new; an existing id fails with ID_EXISTS (never overwritten).

        Tombstoned content (or sources) fail with ERASED_CONTENT / ERASED_SOURCE, checked in
        the same transaction as the insert. ``unique_active`` (online remember): a record
        whose folded text an active record of its actor + namespace already holds fails
        with DUPLICATE_ACTIVE, that record's id as the message; checked in the same
        transaction, so two processes remembering one fact at once store it once.
        ``seen_version``: the ``(PRAGMA data_version, total_changes)`` the caller's own
        duplicate check saw the store at; while nobody has written since, that check stands and
        the query (a scan of the actor's active rows: ~120 ms at 100k) is not run.
        """
        return self.insert_rows(
            [record_to_row(r) for r in records],
            check_tombstones=check_tombstones,
            unique_active=unique_active,
            seen_version=seen_version,
        )

    def insert_rows(
        self,
        rows: Sequence[tuple[Any, ...]],
        *,
        check_tombstones: bool = True,
        unique_active: bool = False,
        seen_version: tuple[int, int] | None = None,
    ) -> BatchResult:
        """:meth:`insert_new` for rows already built by ``record_to_row`` (the import's
        worker processes send rows, not records)."""
        with self.lock, self.transaction():
            con = self.connection
            if unique_active and seen_version is not None:  # nobody else wrote since: skip
                # data_version misses this connection's own commits: total_changes counts them
                now = (con.execute("PRAGMA data_version").fetchone()[0], con.total_changes)
                unique_active = now != tuple(seen_version)
            held_by: dict[str, str] = {}  # row id -> the active record already saying it
            for row in rows if unique_active else ():
                got = con.execute(_SAME_ACTIVE, (row[1], row[2], row[19])).fetchone()
                if got is not None:
                    held_by[row[0]] = got[0]
            # One query per batch, not per record (import speed); same transaction as the
            # inserts, so an erasure cannot slip in between the check and the write.
            check_tombstones = check_tombstones and bool(
                con.execute("SELECT 1 FROM tombstones LIMIT 1").fetchone()
            )
            tombstoned_actors: set[str] = set()
            actors = list({row[1] for row in rows}) if check_tombstones else []
            for qs, chunk in in_chunks(actors):
                q = f"SELECT DISTINCT actor_id FROM tombstones WHERE actor_id IN ({qs})"
                tombstoned_actors.update(row[0] for row in con.execute(q, chunk))

            def sort_out(taken: set[str]) -> tuple[BatchResult, list[tuple[Any, ...]]]:
                result, fresh = BatchResult(), []
                for row in rows:
                    rid = row[0]
                    code = None
                    # content tombstones are per actor: only an actor that has some (or a
                    # record naming sources) needs the per-record query; same answer
                    if check_tombstones:
                        r = row_to_record(row)  # the record the row holds (the same values)
                        if r.actor_id in tombstoned_actors or r.provenance.supersedes:
                            code = self._tombstone_refusal(r, r.provenance.supersedes)
                    if code is None and rid in taken:
                        code = "ID_EXISTS"
                    if code is None and rid in held_by:
                        result.failed.append(
                            ItemFailure(rid, DUPLICATE_ACTIVE, held_by[rid], retryable=False)
                        )
                        continue
                    if code is not None:
                        result.failed.append(ItemFailure(rid, code, retryable=False))
                        continue
                    taken.add(rid)  # a second copy in the same batch is ID_EXISTS, as before
                    fresh.append(row)
                    result.succeeded.append(rid)
                # In id order: ids in a file are often random (uuids), and the primary key's
                # B-tree then takes each batch as one sweep, not as scattered page writes
                fresh.sort(key=_row_id)
                return result, fresh

            # A plain INSERT, first as if no id were stored yet (an import of new records:
            # no lookup). Should one be, the primary key refuses it and the attempt is
            # undone whole; then the stored ids are looked up and refused (ID_EXISTS). A
            # record is never overwritten either way.
            result, fresh = sort_out(set())
            con.execute("SAVEPOINT insert_rows")
            try:
                con.executemany(_INSERT, fresh)
            except sqlite3.IntegrityError:
                con.execute("ROLLBACK TO insert_rows")
                taken: set[str] = set()
                for qs, chunk in in_chunks([row[0] for row in rows]):
                    q = f"SELECT id FROM records WHERE id IN ({qs})"
                    taken.update(row[0] for row in con.execute(q, chunk))
                result, fresh = sort_out(taken)
                con.executemany(_INSERT, fresh)
            con.execute("RELEASE insert_rows")
            faults.checkpoint("import_commit")  # killed here: the transaction never was
        return result

    # -- plumbing ------------------------------------------------------------------------
    # -- change signal (stores.base.ChangeSignal: online recall's staleness check) --------
    def change_marker(self) -> tuple[int, int]:
        """Another connection's commit moves ``data_version``; ours, ``total_changes``."""
        with self.lock:
            c = self.connection
            return c.execute("PRAGMA data_version").fetchone()[0], c.total_changes

    def shard_fingerprint(self, actor_id: str, namespace: str) -> tuple[float, ...]:
        """Count, rowid sum, content length and text checksum of the shard's active rows."""
        with self.lock:
            row: tuple[float, ...] = self.connection.execute(
                f"SELECT count(*), total(rowid), total(length(content)), total({_TEXT_SUM}) "
                "FROM records WHERE actor_id=? AND status=? AND namespace=?",
                (actor_id, Status.active.value, namespace),
            ).fetchone()
        return row

    def record_fingerprint(self, record_id: str) -> tuple[float, ...] | None:
        with self.lock:
            row: tuple[float, ...] | None = self.connection.execute(
                f"SELECT 1, rowid, length(content), {_TEXT_SUM} FROM records WHERE id=?",
                (record_id,),
            ).fetchone()
        return row

    def transaction(self) -> _Transaction:
        return _Transaction(self.connection)

    def checkpoint(self) -> None:
        """Fold the WAL into the main file and truncate it (used after erasure)."""
        with self.lock:
            self.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        with self.lock:
            self.connection.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ASCII content whose key or negation version 3 or 4 can change: a sign, comparison,
# percent or dollar, or a negation word read since version 3 (LIKE is case-insensitive in
# ASCII); '-' and '+' (version 3) also cover version 4's minus and plus after a letter,
# its arrows and a minus before '$'; '&' is version 4's 'and'
_REFOLD_SYMBOLS = ("-", "+", "%", "$", "<", ">", "#", "!=", "&", *(f".{d}" for d in range(10)))
_REFOLD_WORDS = ("cannot", "neither", "nor", "nobody", "nowhere", "dont", "doesnt", "didnt",
             "isnt", "arent", "wasnt", "werent", "cant", "wont", "couldnt", "wouldnt",
             "shouldnt", "hasnt", "havent", "hadnt", "aint")  # fmt: skip
_REFOLD_LIKE = " OR ".join(
    ["instr(content, ?)"] * len(_REFOLD_SYMBOLS) + ["content LIKE ?"] * len(_REFOLD_WORDS)
)


def _refold(c: sqlite3.Connection, after: int) -> int | None:
    """Recompute norm_sha256 and negated where the fold or the negation rule changed (store
    versions 1 to 6), for one batch of rows past rowid ``after``; the rowid to go on
    after, None at the end of the table.

    Only non-ASCII content (more UTF-8 bytes than characters; a NUL also counts, harmlessly),
    the version-0 key of an empty fold, or ASCII content holding a sign, comparison,
    sharp, ampersand, percent, dollar or a negation word read since version 3 can carry values the
    current code does not give; other ASCII text folds exactly as it always did. The rows
    are read whole before any is written (no row is updated under an open cursor); one
    pass over the table, once per file.
    """
    q = (
        "SELECT rowid, content, norm_sha256, negated FROM records WHERE rowid > ? AND "
        f"(norm_sha256 = ? OR length(CAST(content AS BLOB)) <> length(content) OR {_REFOLD_LIKE}) "
        "ORDER BY rowid LIMIT ?"
    )
    args = (
        after,
        _OLD_EMPTY_KEY,
        *_REFOLD_SYMBOLS,
        *(f"%{w}%" for w in _REFOLD_WORDS),
        _REFOLD_BATCH,
    )
    rows = c.execute(q, args).fetchall()
    new = []
    for rowid, content, old, old_neg in rows:
        key, neg = norm_sha256(content), int(negates(content))
        if (key, neg) != (old, old_neg):
            new.append((key, neg, rowid))
    c.executemany("UPDATE records SET norm_sha256=?, negated=? WHERE rowid=?", new)
    return int(rows[-1][0]) if len(rows) == _REFOLD_BATCH else None


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT/ROLLBACK; nests as a no-op inside an open transaction."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self.owner = False

    def __enter__(self) -> sqlite3.Connection:
        if not self.conn.in_transaction:
            self.conn.execute("BEGIN IMMEDIATE")
            self.owner = True
        return self.conn

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.owner:
            return
        if exc_type:
            rollback(self.conn)  # perhaps rolled back by SQLite already (a full disk)
        else:
            self.conn.execute("COMMIT")
