"""The AgentCore store's write path: one chunk (<= MAX_BATCH records) at a time.

Upsert: the sidecar's new version first (conditional: a lost race is a CONFLICT item),
then BatchUpdate for records AgentCore has and BatchCreate for the rest, then the sidecar
records the new ``memoryRecordId``. A create interrupted between the two is ``pending``
in the sidecar and is recovered by its indexed ``memlife_id`` before anything else.

Each create attempt has a nonce (``SidecarItem.create_nonce``), drawn when the pending
item is staged and kept while it stays pending; it is part of the request's
``clientToken``. A retry of the same attempt is deduplicated by the service; a new attempt
(the record was deleted, then written again with the same values) is a new request.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from memlife.model import MemoryRecord
from memlife.stores.agentcore.cache import ReadCache
from memlife.stores.agentcore.errors import QuotaExceeded
from memlife.stores.agentcore.mapping import (
    ID_KEY,
    MEMORY_RECORD_ID_RE,
    OVERFLOW_KEY,
    blob_hash,
    encode_metadata,
    first_namespace,
    is_ours,
    meta_value,
    safe_value,
)
from memlife.stores.agentcore.transport import Entry, Outcome, Transport, failure_of, stop_of
from memlife.stores.agentcore_sidecar import Sidecar, SidecarItem, fitting_blobs
from memlife.stores.base import BatchResult, ItemFailure, StoreError

KEEP_BLOBS = 4  # overflow versions kept in the sidecar (package docstring)
WRITING_STALE_S = 60.0  # an update in flight longer than this: its writer died


def _in_flight(item: SidecarItem | None) -> bool:
    if item is None or item.writing is None:
        return False
    age = datetime.now(UTC) - datetime.fromisoformat(item.writing)
    return age.total_seconds() < WRITING_STALE_S


def new_nonce() -> str:
    return uuid.uuid4().hex


class ChunkWriter:
    """Writes and deletes one chunk of records; per-item outcomes in a BatchResult."""

    def __init__(
        self,
        sidecar: Sidecar,
        transport: Transport,
        cache: ReadCache,
        *,
        strategy_id: str | None,
    ):
        self.sidecar = sidecar
        self.transport = transport
        self.cache = cache
        self.strategy_id = strategy_id
        self._registered: set[tuple[str, str]] = set()

    def write(
        self, records: Sequence[MemoryRecord], known: dict[str, SidecarItem | None] | None
    ) -> BatchResult:
        """Upsert <= MAX_BATCH records: sidecar first, then AgentCore, then the sidecar's ids.

        ``known``: the records' current sidecar items when the caller has just read them.
        """
        result = BatchResult()
        if not records:
            return result
        by_key = {safe_value(r.id): r for r in records}
        current = self._current_items(by_key, known)
        metadata: dict[str, dict[str, Any]] = {}
        staged = self._stage(by_key, current, metadata, result)
        old_ns = {k: current[k].namespace if k in current else None for k in staged}
        creates = [k for k, it in staged.items() if not it.memory_record_id]
        updates = [k for k, it in staged.items() if it.memory_record_id]
        recreate, stop = self._update(updates, by_key, staged, metadata, old_ns, result)
        creates += recreate
        if stop is None:
            stop = self._create(creates, by_key, staged, metadata, result)
        else:  # the shard stops: no create goes out after the quota stop
            result.failed += [ItemFailure(by_key[k].id, "QUOTA_EXCEEDED", stop) for k in creates]
        done = set(result.succeeded)
        self.register(
            {(r.actor_id, r.namespace) for k, r in by_key.items() if k in staged and r.id in done}
        )
        if stop is not None:  # after the bookkeeping: what was done is recorded, then stop
            raise QuotaExceeded(stop, partial=result)
        return result

    def _current_items(
        self, by_key: dict[str, MemoryRecord], known: dict[str, SidecarItem | None] | None
    ) -> dict[str, SidecarItem]:
        """The sidecar items of the records about to be written (pending ones recovered;
        a native record written back is adopted, never duplicated)."""
        if known is None:
            current = self.sidecar.get_many(by_key)
        else:
            current = {safe_value(rid): it for rid, it in known.items() if it is not None}
        for it in current.values():
            if it.pending:
                it.memory_record_id = self.transport.find_by_key(it.namespace, it.key)
        for key, r in by_key.items():
            if key not in current and MEMORY_RECORD_ID_RE.fullmatch(r.id):
                raw = self.transport.get(r.id, None)
                if raw is not None and not is_ours(raw):
                    ns = first_namespace(raw, r.namespace)
                    current[key] = SidecarItem(key, r.id, r.actor_id, ns, 0, r.id)
        return current

    def _stage(
        self,
        by_key: dict[str, MemoryRecord],
        current: dict[str, SidecarItem],
        metadata: dict[str, dict[str, Any]],
        result: BatchResult,
    ) -> dict[str, SidecarItem]:
        """Step 1: the sidecar's new version and overflow blob, still the old
        memoryRecordId. Fills ``metadata``; a lost race is a CONFLICT in ``result``."""
        writes: list[tuple[SidecarItem, int]] = []
        busy: dict[str, str] = {}
        for key, r in by_key.items():
            meta, blob = encode_metadata(r)
            metadata[key] = meta
            old = current.get(key)
            if _in_flight(old):  # its BatchUpdate could still land after ours
                busy[key] = "CONFLICT"
                continue
            blobs = dict(old.blobs) if old else {}
            if blob:
                h = blob_hash(blob)
                blobs.pop(h, None)
                blobs[h] = blob
                blobs = fitting_blobs(dict(list(blobs.items())[-KEEP_BLOBS:]))
            mrid = old.memory_record_id if old else None
            nonce = None
            if mrid is None:  # a create: the pending attempt's nonce, or a new attempt
                nonce = (old.create_nonce if old else None) or new_nonce()
            # an update keeps the namespace the record is in until BatchUpdate has moved it
            # (_moved): a failed move left reads and deletes naming the new one (403)
            new = SidecarItem(
                key=key,
                record_id=r.id,
                actor_id=r.actor_id,
                namespace=old.namespace if old and mrid else r.namespace,
                version=(old.version if old else 0) + 1,
                memory_record_id=mrid,
                blobs=blobs,
                create_nonce=nonce,
                writing=datetime.now(UTC).isoformat() if mrid else None,
            )
            writes.append((new, old.version if old else 0))
        conflicts = {**self.sidecar.put_many(writes), **busy}
        for key, why in conflicts.items():
            result.failed.append(ItemFailure(by_key[key].id, why, "sidecar changed concurrently"))
        return {w.key: w for w, _ in writes if w.key not in conflicts}

    def _update(
        self,
        keys: list[str],
        by_key: dict[str, MemoryRecord],
        staged: dict[str, SidecarItem],
        metadata: dict[str, dict[str, Any]],
        old_ns: dict[str, str | None],
        result: BatchResult,
    ) -> tuple[list[str], str | None]:
        """Step 2a: BatchUpdate the records AgentCore has. Returns the keys to re-create
        (deleted behind our back: an upsert re-creates them) and a quota stop's message."""
        if not keys:
            return [], None
        entries = []
        for k in keys:
            r = by_key[k]
            body: dict[str, Any] = {
                "memoryRecordId": staged[k].memory_record_id,
                "timestamp": r.created_at,
                "content": {"text": r.content},
                "namespaces": [r.namespace],
                "metadata": metadata[k],
            }
            if old_ns[k] and old_ns[k] != r.namespace:
                body["sourceNamespaces"] = [old_ns[k]]
            entries.append(Entry(k, body))
        outcomes = self.transport.batch("update", entries)
        gone = []
        answered = [k for k in keys if outcomes[k].http != 404]  # 404s are staged anew
        self._settle(answered, {k for k in keys if outcomes[k].ok}, by_key, staged)
        for k in keys:
            o = outcomes[k]
            if o.ok:
                result.succeeded.append(by_key[k].id)
                self.cache.remember(k, str(staged[k].memory_record_id), by_key[k].namespace)
                self.cache.remember_blobs(staged[k].blobs)
            elif o.http == 404:
                self.cache.forget([k])
                gone.append(k)
            else:
                code, retry = failure_of(o)
                result.failed.append(ItemFailure(by_key[k].id, code, o.message, retry))
        return self._restage_pending(gone, by_key, staged, result), stop_of(outcomes)

    def _settle(
        self,
        keys: list[str],
        ok: set[str],
        by_key: dict[str, MemoryRecord],
        staged: dict[str, SidecarItem],
    ) -> None:
        """The updates are answered: no longer in flight, and the records BatchUpdate moved
        name their new namespace (a lost race leaves the other writer's item)."""
        writes = [
            (replace(staged[k], version=staged[k].version + 1, writing=None,
                     namespace=by_key[k].namespace if k in ok else staged[k].namespace),
             staged[k].version)
            for k in keys
        ]  # fmt: skip
        conflicts = self.sidecar.put_many(writes) if writes else {}
        for new, _ in writes:
            if new.key not in conflicts:
                staged[new.key] = new

    def _restage_pending(
        self,
        keys: list[str],
        by_key: dict[str, MemoryRecord],
        staged: dict[str, SidecarItem],
        result: BatchResult,
    ) -> list[str]:
        """Records deleted behind our back become new create attempts: pending in the
        sidecar (a crash before step 3 is then recovered, not duplicated) with a new nonce
        (the service must not answer with the deleted record). Returns the keys staged."""
        writes = []
        for k in keys:
            it = staged[k]
            new = replace(
                it, version=it.version + 1, memory_record_id=None, create_nonce=new_nonce(),
                writing=None,
                namespace=by_key[k].namespace,  # created where the record is meant to be
            )  # fmt: skip
            writes.append((new, it.version))
        conflicts = self.sidecar.put_many(writes) if writes else {}
        for key, why in conflicts.items():
            result.failed.append(ItemFailure(by_key[key].id, why, "sidecar changed concurrently"))
        for new, _ in writes:
            if new.key not in conflicts:
                staged[new.key] = new
        return [k for k in keys if k not in conflicts]

    def _create(
        self,
        keys: list[str],
        by_key: dict[str, MemoryRecord],
        staged: dict[str, SidecarItem],
        metadata: dict[str, dict[str, Any]],
        result: BatchResult,
    ) -> str | None:
        """Step 2b: BatchCreate the rest; step 3: record the new ids in the sidecar.
        Returns a quota stop's message (the creates it left undone stay pending)."""
        if not keys:
            return None
        entries = []
        for k in keys:
            r = by_key[k]
            body: dict[str, Any] = {
                "namespaces": [r.namespace],
                "content": {"text": r.content},
                "timestamp": r.created_at,
                "metadata": metadata[k],
            }
            if self.strategy_id:
                body["memoryStrategyId"] = self.strategy_id
            entries.append(Entry(k, body, staged[k].create_nonce or ""))
        outcomes = self.transport.batch("create", entries)
        done: list[tuple[SidecarItem, int]] = []
        for k in keys:
            o, it = outcomes[k], staged[k]
            if o.ok and o.memory_record_id:
                live = replace(
                    it, version=it.version + 1, memory_record_id=o.memory_record_id,
                    create_nonce=None,
                )  # fmt: skip
                done.append((live, it.version))
            else:
                code, retry = failure_of(o)
                result.failed.append(ItemFailure(by_key[k].id, code, o.message, retry))
                if o.answered:  # the token would replay this answer: the retry is a new try
                    done.append((replace(it, version=it.version + 1, create_nonce=new_nonce()),
                                 it.version))  # fmt: skip
        lost = self.sidecar.put_many(done)
        for it, _ in done:
            if it.memory_record_id is None:  # a failed create, staged again (reported above)
                continue
            if it.key in lost and not self._settle_lost_create(it):
                result.failed.append(
                    ItemFailure(it.record_id, "CONFLICT", "sidecar changed during create")
                )
            else:
                result.succeeded.append(it.record_id)
                self.cache.remember(it.key, str(it.memory_record_id), it.namespace)
                self.cache.remember_blobs(it.blobs)
        return stop_of(outcomes)

    def _settle_lost_create(self, it: SidecarItem) -> bool:
        """Our create landed but the sidecar item moved meanwhile (another writer of the
        id, or a delete). Keep the record only where the item names it (claiming a still
        pending item); anything else is an orphan no id reaches: delete it now."""
        cur = self.sidecar.get(it.key)
        if cur is not None and cur.pending:
            claim = replace(cur, version=cur.version + 1, namespace=it.namespace,
                            memory_record_id=it.memory_record_id, create_nonce=None)  # fmt: skip
            cur = (
                self.sidecar.get(it.key) if self.sidecar.put_many([(claim, cur.version)]) else claim
            )
        if cur is not None and cur.memory_record_id == it.memory_record_id:
            return True
        body = {"memoryRecordId": it.memory_record_id, "namespace": it.namespace}
        self.transport.batch("delete", [Entry(it.key, body)])
        return False

    def register(self, shards: set[tuple[str, str]]) -> None:
        new = shards - self._registered
        if new:
            self.sidecar.register_shards(sorted(new))
            self._registered |= new

    def _native(self, rid: str) -> bool:
        """Whether ``rid`` names a record AgentCore extracted itself: the AgentCore id of one
        of ours is no record id (reads say it does not exist; a delete by it removed ours
        under another name, with no result naming it)."""
        raw = self.transport.get(rid, None)
        return raw is not None and not is_ours(raw)

    def _stray(self, key: str, named: str | None) -> dict[str, str] | None:
        """Where this store listed (or read) a record carrying ``key`` that the sidecar does
        not name (``named``): an orphan (a create landing after the id's erasure, whose
        clean-up delete failed) or a record whose item was lost (a restored table). A
        delete by the id must reach what a listing shows under it (audit 51ii). Read back
        first: the location must still carry the id."""
        where = self.cache.locations([key]).get(key)
        if where is None or where[0] == named:
            return None
        raw = self.transport.get(where[0], where[1], quiet=True)
        if raw is None or meta_value(raw.get("metadata") or {}, ID_KEY) != key:
            return None
        return {"memoryRecordId": where[0], "namespace": where[1]}

    def delete(self, ids: Sequence[str]) -> BatchResult:
        result = BatchResult()
        keys = {rid: safe_value(rid) for rid in ids}
        items = self.sidecar.get_many(keys.values())
        entries: list[Entry] = []
        gone: list[str] = []  # sidecar keys to drop
        strays: dict[str, str] = {}  # entry key of a record no item names -> its id's key
        for rid, key in keys.items():
            item = items.get(key)
            if item is not None and item.pending:
                item.memory_record_id = self.transport.find_by_key(item.namespace, item.key)
            stray = self._stray(key, item.memory_record_id if item is not None else None)
            if stray is not None:
                strays[f"{key}#stray"] = key
                entries.append(Entry(f"{key}#stray", stray))
            if item is not None and item.memory_record_id:
                body = {"memoryRecordId": item.memory_record_id, "namespace": item.namespace}
                entries.append(Entry(key, body))
            elif item is None and MEMORY_RECORD_ID_RE.fullmatch(rid) and self._native(rid):
                entries.append(Entry(key, {"memoryRecordId": rid}))  # native record
            elif stray is not None:
                continue  # the stray alone carries the id: its outcome is the id's
            else:
                result.missing.append(rid)
                if item is not None:
                    gone.append(key)  # a create that never happened
        by_key = {k: rid for rid, k in keys.items()}
        outcomes = self.transport.batch("delete", entries) if entries else {}
        for e in entries:
            if e.key in strays:
                continue
            o, rid = outcomes[e.key], by_key[e.key]
            if o.ok:
                result.succeeded.append(rid)
                gone.append(e.key)
            elif o.http == 404:
                result.missing.append(rid)
                gone.append(e.key)
            else:
                code, retry = failure_of(o)
                result.failed.append(ItemFailure(rid, code, o.message, retry))
        self._settle_strays(strays, outcomes, by_key, result)
        self.cache.forget(list(keys.values()))
        try:
            self.sidecar.delete_many(gone, {k: it.version for k, it in items.items() if k in gone})
        except StoreError as exc:
            # AgentCore has answered: a clean-up throttled past botocore's attempts must not
            # lose what it deleted (journaled failed, the next night receipted it
            # already_absent: audit 53ii). The stop carries the outcome, as a quota's does;
            # an item left behind reads as absent (404) and goes with the id's next delete.
            exc.partial = result  # type: ignore[attr-defined]  # read by until_stopped
            raise
        stop = stop_of(outcomes)
        if stop is not None:  # after the bookkeeping: the deleted ones are out of the sidecar
            raise QuotaExceeded(stop, partial=result)
        return result

    @staticmethod
    def _settle_strays(
        strays: dict[str, str],
        outcomes: dict[str, Outcome],
        by_key: dict[str, str],
        result: BatchResult,
    ) -> None:
        """A stray's delete and the named record's decide the id's outcome together: a
        stray that stayed fails the id (never ``missing`` while its text is there); one
        that went makes a ``missing`` id deleted."""
        for entry_key, key in strays.items():
            o, rid = outcomes[entry_key], by_key[key]
            failed = {f.id for f in result.failed}
            if not (o.ok or o.http == 404):
                for done in (result.succeeded, result.missing):
                    if rid in done:
                        done.remove(rid)
                if rid not in failed:
                    code, retry = failure_of(o)
                    result.failed.append(ItemFailure(rid, code, o.message, retry))
            elif rid in failed or rid in result.succeeded:
                continue
            elif o.ok:
                if rid in result.missing:
                    result.missing.remove(rid)
                result.succeeded.append(rid)
            elif rid not in result.missing:
                result.missing.append(rid)


def drop_stale_blobs(transport: Transport, sidecar: Sidecar, keys: Sequence[str]) -> int:
    """Keep only the overflow blob AgentCore's current metadata names, for these records'
    sidecar items. The sidecar keeps a few (KEEP_BLOBS) so a racing update finds its own;
    an erasure that rebuilt a record drops the older ones, and the erased source's values
    (an owner metadata could not hold) with them. A lost race keeps them. Returns how many
    items were rewritten."""
    writes = []
    for item in sidecar.get_many(keys).values():
        if not item.memory_record_id or len(item.blobs) < 2:
            continue
        raw = transport.get(item.memory_record_id, item.namespace)
        want = meta_value(raw.get("metadata") or {}, OVERFLOW_KEY) if raw else None
        blobs = {h: b for h, b in item.blobs.items() if h == want}
        if blobs != item.blobs:
            writes.append((replace(item, version=item.version + 1, blobs=blobs), item.version))
    return len(writes) - len(sidecar.put_many(writes)) if writes else 0
