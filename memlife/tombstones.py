"""Erasure tombstones: (actor, record id, content sha256, normalised sha256). Never content.

An erasure writes its tombstones BEFORE it selects what was derived from the erased
records and before it deletes anything. From then on:
  - a consolidation replacement whose sources include an erased id, or whose content
    hashes to erased content, is refused in the same transaction as its write
    (:func:`write_replacement`, ``SqliteStore.put_replacement``): code ERASED_SOURCE /
    ERASED_CONTENT, never retried;
  - an import or a ``remember`` of the same content for that actor is refused with
    ERASED_CONTENT (exact hash, or the same text once case and punctuation are folded).

The SQLite store keeps the table in its own file (one transaction covers the check and
the write). Other stores use ``$MEMLIFE_HOME/tombstones.db`` and check right before
the write (no shared transaction: documented as weaker in docs/evaluation.md).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from memlife.errors import is_throttling
from memlife.model import MemoryRecord, content_sha256
from memlife.settings import settings
from memlife.stores.base import BatchResult, ItemFailure, MemoryStore
from memlife.stores.sqlite import SqliteStore, erased_again, tombstone_norm
from memlife.stores.sqlite import erased_id as erased_id  # re-exported: it lived here

ERASED_CONTENT = "ERASED_CONTENT"
ERASED_SOURCE = "ERASED_SOURCE"


def rows_for(records: Iterable[MemoryRecord]) -> list[tuple[str, str, str, str | None]]:
    """Tombstone rows for these records: both the recorded and the computed content hash."""
    out = []
    for r in records:
        norm = tombstone_norm(r.content)
        out.append((r.actor_id, r.id, content_sha256(r.content), norm))
        if r.sha256 != content_sha256(r.content):
            out.append((r.actor_id, f"{r.id}#recorded", r.sha256, norm))
        for text in _carried_texts(r):  # a LangGraph JSON item's texts: erased with it
            sha = content_sha256(text)
            out.append((r.actor_id, erased_again(r.id, sha), sha, tombstone_norm(text)))
    return out


def _carried_texts(r: MemoryRecord) -> list[str]:
    """The free-text strings (four words or more: a status or a place is no statement) a
    LangGraph JSON item carries, at any depth: its content is the canonical JSON, and the
    text comes back as ``{"content": text}`` or beside other fields (a LangGraph put checks
    each string it carries)."""
    if not (r.provenance.source_event or "").startswith("langgraph:json:"):
        return []
    try:
        stack, out = [json.loads(r.content)], set()
    except ValueError:
        return []
    while stack:
        v = stack.pop()
        if isinstance(v, dict | list):
            stack.extend(v.values() if isinstance(v, dict) else v)
        elif isinstance(v, str) and len(v.split()) > 3:  # a sentence, not "in progress"
            out.add(v)
    return sorted(out)


class _SideTombstones(SqliteStore):
    """Tombstones for stores without a SQLite file of their own ($MEMLIFE_HOME/tombstones.db)."""


_side_lock = threading.Lock()
_side: dict[str, SqliteStore] = {}


class TombstoneBackend(Protocol):
    """Where tombstones live: the SQLite store itself, or a state backend for remote stores
    (DynamoDB: ``tomb#{actor_id}`` items, see memlife/state/dynamodb.py)."""

    def add_tombstones(self, rows: Sequence[tuple[str, str, str, str | None]]) -> int: ...

    def tombstones(self, actor_id: str | None = None) -> list[dict[str, str | None]]: ...

    def tombstone_refusal(self, r: MemoryRecord, sources: Sequence[str] = ()) -> str | None: ...


def _backend(store: MemoryStore, *, claim: bool = False) -> TombstoneBackend:
    """Where ``store``'s tombstones live; ``claim`` (a writer) binds an unbound home."""
    if isinstance(store, SqliteStore):
        return store
    own: TombstoneBackend | None = getattr(store, "tombstone_backend", None)  # remote state
    if own is not None:
        return own
    from memlife.state import uses_remote_state

    remote = uses_remote_state(store)  # $MEMLIFE_STATE: the DynamoDB state table
    if remote is not None:
        from memlife.state.side import DynamoTombstones

        return remote.part("tombstones", DynamoTombstones)
    from memlife.state.home import check_home

    check_home(store, claim=claim)  # the home's tombstones are one store's (state/home.py)
    path = str(settings().home / "tombstones.db")
    with _side_lock:
        if path not in _side:
            _side[path] = _SideTombstones(path)
        return _side[path]


def add(store: MemoryStore, records: Iterable[MemoryRecord]) -> int:
    return _backend(store, claim=True).add_tombstones(rows_for(records))


def listing(store: MemoryStore, actor_id: str | None = None) -> list[dict[str, Any]]:
    return _backend(store).tombstones(actor_id)


def erased_times(
    stores: Sequence[MemoryStore], pairs: set[tuple[str, str]]
) -> dict[tuple[str, str], datetime]:
    """When each of the (actor, record id) ``pairs`` an erasure of one of ``stores`` removed
    was last erased (the access ledger drops a read of it up to then: a later read is of a
    record that took the id since; memlife/ledger_ingest.py). A throttled read of the
    tombstones raises: read as "nothing erased" it let an erased record's read into the
    ledger for good (audit 51x3); the caller keeps its rows for a later write."""
    erased: dict[tuple[str, str], datetime] = {}
    for store in stores:
        for actor in {actor for actor, _ in pairs}:
            try:
                rows = listing(store, actor)
            except Exception as exc:  # a closed or failing store: its erasures scrub what they see
                if is_throttling(exc):
                    raise
                break
            names = {str(t["record_id"]) for t in rows}
            for t in rows:
                name = str(t["record_id"])
                at = _when(t.get("erased_at"))
                # the name as written and the id it stands for: an id that holds '#' itself
                # ("m#recorded", which the importer accepts) is erased under its own name
                for rid in {name, erased_id(name, str(t["content_sha256"]), names)}:
                    pair = (actor, rid)
                    if pair in pairs and (pair not in erased or at > erased[pair]):
                        erased[pair] = at
    return erased


def _held_again(store: MemoryStore, actor: str, rid: str) -> bool:
    """Whether the actor holds ``rid`` again, with a text no tombstone names (an erased id
    reused; a live record under it with the erased text is the erased record before its
    delete)."""
    live = store.get(rid)
    return (
        live is not None and live.actor_id == actor
        and _backend(store).tombstone_refusal(live, ()) is None
    )  # fmt: skip


def reused(stores: Sequence[MemoryStore], pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Those (actor, record id) ``pairs`` whose id the actor holds again, with a text no
    tombstone names: only their reads after the erasure are the new record's (the erased
    record is served between its tombstone and its delete; a clock may run ahead)."""
    out: set[tuple[str, str]] = set()
    for store in stores:
        try:
            out |= {(actor, rid) for actor, rid in sorted(pairs - out)
                    if _held_again(store, actor, rid)}  # fmt: skip
        except Exception:  # a closed or failing store: no id counts as reused (reads dropped)
            continue
    return out


def _when(value: object) -> datetime:
    """A tombstone's erased_at, aware; one that cannot be read counts as the end of time
    (every read of its id is dropped: the safe side)."""
    try:
        at = datetime.fromisoformat(str(value))
    except ValueError:
        return datetime.max.replace(tzinfo=UTC)
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def refusal(store: MemoryStore, record: MemoryRecord) -> str | None:
    """ERASED_CONTENT / ERASED_SOURCE when a tombstone forbids this record, else None. A
    source id the actor reused since its erasure is no erased source while its record
    holds a text no tombstone names (the SQLite store decides that in its own query)."""
    backend = _backend(store)
    sources = record.provenance.supersedes
    code = backend.tombstone_refusal(record, sources)
    if code != ERASED_SOURCE or isinstance(backend, SqliteStore) and backend is store:
        return code
    for s in sources:
        erased = backend.tombstone_refusal(record, [s]) == ERASED_SOURCE
        if erased and not _held_again(store, record.actor_id, s):
            return ERASED_SOURCE
    return None


def write_replacement(store: MemoryStore, record: MemoryRecord) -> BatchResult:
    """The replacement write of a consolidation, refused when its sources were erased."""
    if isinstance(store, SqliteStore):
        return store.put_replacement(record)
    code = refusal(store, record)
    if code is not None:
        return BatchResult(failed=[ItemFailure(record.id, code, "tombstoned", retryable=False)])
    return store.put_many([record])


def insert_new(store: MemoryStore, records: Sequence[MemoryRecord]) -> BatchResult:
    """Insert-only write (import, remember): an existing id fails ID_EXISTS, erased content fails."""
    if isinstance(store, SqliteStore):
        return store.insert_new(records)
    result = BatchResult()
    fresh = []
    for r in records:
        code = refusal(store, r) or ("ID_EXISTS" if store.get(r.id) is not None else None)
        if code:
            result.failed.append(ItemFailure(r.id, code, retryable=False))
        else:
            fresh.append(r)
    if fresh:
        result.extend(store.put_many(fresh))
    return result
