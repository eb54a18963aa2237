"""Which record holds a LangGraph item: ids derived from (actor, namespace, key), one
slot per value the lifecycle has taken out of service.

A nightly merge supersedes an item's record (its replacement lists the id in
``provenance.supersedes``) and the gate may quarantine one (a snapshot restores it). A put
of the same key afterwards is a new value: written over that row, the replacement's
lineage named a record saying something else, and an erasure of the new value took the
replacement for one built from it (a model merge withdrawn: a fact never erased lost with
it; audit 53d). So such a row is history: the put writes the key's first free slot.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from memlife.model import MemoryRecord, Status
from memlife.stores.base import MemoryStore

HISTORY = (Status.superseded, Status.quarantined)  # rows a replacement or a snapshot names
# Slots for one key's values, all read in one batched read (SQLite: one query; AgentCore:
# one sidecar BatchGetItem): the night's superseded retention deletes old values, so a slot
# frees again and a gap never hides a newer value (a scan stopping at a gap would).
SLOTS = 64
EVENT = "langgraph"  # provenance.source_event of a put: "langgraph:<kind>:<key>"


def record_id(actor: str, path: str, key: str, generation: int = 0) -> str:
    tail = f"\x00{generation}" if generation else ""  # generation 0: the ids of before
    digest = hashlib.sha256(f"{actor}\x00{path}\x00{key}{tail}".encode()).hexdigest()
    return f"lg-{digest[:40]}"


def _get_many(store: MemoryStore, ids: Sequence[str]) -> dict[str, MemoryRecord]:
    get_many = getattr(store, "get_many", None)
    if get_many is not None:
        return dict(get_many(list(ids)))
    return {i: r for i in ids if (r := store.get(i)) is not None}


def item_row(
    store: MemoryStore, actor: str, path: str, key: str
) -> tuple[str, MemoryRecord | None]:
    """(id, row) of the item: its current row (not history; the latest created if a
    snapshot restored an older one beside it); with none, the first free slot a put
    writes next and None."""
    ids, rows, live = _in_service(store, actor, path, key)
    if live:
        rid = live[0]
        return rid, store.get(rid)  # as ``get`` reads it (AgentCore: its native expiry)
    free = next((i for i in ids if i not in rows), None)
    if free is None:
        raise RuntimeError(f"item {ids[0]}: {SLOTS} values out of service; none can be added")
    return free, None


def _in_service(
    store: MemoryStore, actor: str, path: str, key: str
) -> tuple[list[str], dict[str, MemoryRecord], list[str]]:
    """(slot ids, rows found, the ids of the key's values not history, newest first)."""
    ids = [record_id(actor, path, key, g) for g in range(SLOTS)]
    rows = _get_many(store, ids)
    # a key may hold a NUL: "k\x001"'s slot 0 is "k"'s slot 1 (the same preimage). A row
    # put under another key is that item's: never this one's value, and its slot is not
    # free (a get answered the other item, a put wrote over it: audit 53t)
    found = {i: r for i, r in rows.items() if _put_as(r) in (None, key)}
    live = [
        (found[i].created_at, -n, i)
        for n, i in enumerate(ids)
        if i in found and found[i].status not in HISTORY
    ]
    return ids, rows, [i for *_, i in sorted(live, reverse=True)]


def older_values(store: MemoryStore, actor: str, path: str, key: str) -> list[MemoryRecord]:
    """The key's values in service other than the one ``item_row`` reads: a quarantine
    restore brings an older slot back beside the value a put wrote since (audit 53r1).
    ``delete`` takes them with the item, so none is served once it is deleted."""
    _, rows, live = _in_service(store, actor, path, key)
    return [rows[i] for i in live[1:]]


def shadowed(store: MemoryStore, rec: MemoryRecord) -> bool:
    """Whether ``rec`` is a value of its item that a newer value of the same key hides
    (``older_values``): ``search`` and ``list_namespaces`` show what ``get`` reads, one value
    per key. A row not in its key's slots (written otherwise) is never hidden."""
    key = _put_as(rec)
    if key is None or rec.status is not Status.active:
        return False
    ids, _, live = _in_service(store, rec.actor_id, rec.namespace, key)
    return rec.id in ids and bool(live) and live[0] != rec.id


def _put_as(row: MemoryRecord) -> str | None:
    """The item key a put wrote ``row`` under (``langgraph:<kind>:<key>``, as
    langgraph.decode reads it); None for a row written otherwise."""
    parts = (row.provenance.source_event or "").split(":", 2)
    return parts[2] if len(parts) == 3 and parts[0] == EVENT else None
