"""LangGraph ``BaseStore`` over a memlife store: LangGraph agents get the lifecycle for free.

``pip install 'memlife[langgraph]'``, then::

    from memlife.integrations.langgraph import MemlifeStore
    graph = builder.compile(store=MemlifeStore("sqlite:///agent.db"))

Mapping (one memlife record per LangGraph item):

- namespace ``("users", "u1", "prefs")`` is the memlife namespace ``/users/u1/prefs``; its
  actor is ``actor_of(namespace)``: by default the label after a leading ``"users"``, else
  an explicit ``actor_of`` (``actor_label(1)`` for langmem's ``("memories", "{user_id}")``),
  never a guess. A label holding ``/`` is refused.
- the record id is derived from (actor, namespace, key): a second ``put`` updates the same
  record (one a night merged is kept: the put writes the next id, langgraph_ids.py); the
  key, kept in ``provenance.source_event`` (``langgraph:<kind>:<key>``), is a
  string of at most :data:`KEY_MAX_CHARS` (256) characters, a record id's bound: a longer
  one is refused by its length, never quoted.
- the value: ``{"content": "text"}`` is stored as the text, any other dict as its canonical
  JSON, which reads back exactly as written: what JSON cannot carry exactly (a non-string
  key, a tuple, a set, bytes, NaN or infinity; InMemoryStore keeps ``{1: "a"}``, JSON
  would give ``{"1": "a"}``) is refused, saying which. A record memlife wrote itself
  reads back as ``{"content": text}`` under its record id.
- ``delete`` marks the record ``pending_delete`` (gone for get/search at once; the nightly
  run deletes it with a receipt). A ``legal_hold`` or held record is never rewritten.
- ``search(query=...)`` is memlife's hybrid recall (MiniLM + BM25) and its fused scores; a
  ``filter`` keeps the best-ranked items passing it, however deep they rank. Items returned
  go to the access ledger the nightly scoring reads. Without a query: namespace then key
  order. Expired records are served by neither, nor by ``get``.
- ``put`` writes only over the row it read (SQLite: one transaction checks tombstones,
  holds and that row), within the policy's ``limits.content_max_bytes``, never erased
  text: neither the value as stored nor any string value it carries, at any depth.

After a nightly run consolidates items, the originals are superseded: ``get`` of an old key
returns None and ``search`` finds the replacement: stale and duplicate memories leave.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memlife.api import Memory
from memlife.errors import InputError
from memlife.integrations.langgraph_filters import matches, ns_matches
from memlife.integrations.langgraph_ids import EVENT, HISTORY, item_row, older_values, shadowed
from memlife.integrations.langgraph_ids import record_id as record_id  # re-exported
from memlife.integrations.langgraph_values import KEY_MAX_CHARS as KEY_MAX_CHARS  # re-exported
from memlife.integrations.langgraph_values import check_key, no_item_has, ttl_deadline
from memlife.integrations.langgraph_values import json_problem as json_problem  # re-exported
from memlife.ledger import query_sha256
from memlife.model import (
    MemoryRecord,
    MemoryType,
    Provenance,
    RetentionClass,
    Source,
    Status,
    content_sha256,
    utcnow,
)
from memlife.namespaces import new_namespace_problem
from memlife.online.inputs import actor_arg, stored_time, valid_unicode
from memlife.stores.base import BatchResult, ItemFailure, MemoryStore, iter_shard
from memlife.stores.sqlite import CHANGED, HELD, SqliteStore
from memlife.tombstones import ERASED_CONTENT, ERASED_SOURCE, refusal

_EVENT = EVENT
_PUT_ATTEMPTS = 5  # reads and conditional writes of one put raced by other writers


def default_actor_of(namespace: tuple[str, ...]) -> str:
    """``("users", "u1", ...)`` -> ``u1``; any other namespace is refused: which label names
    the user is the application's choice (langmem's ``("memories", "{user_id}")`` has it
    second); a guess at the first made all its users one actor, mixing tenants' recall and
    erasures. Pass ``actor_of=actor_label(i)`` or a function of your own."""
    if len(namespace) > 1 and namespace[0] == "users":
        return namespace[1]
    raise InvalidNamespaceError(
        f"namespace {namespace!r}: cannot tell which label is the actor (the default only "
        "maps ('users', <actor>, ...)); pass MemlifeStore(actor_of=actor_label(i)) or a "
        "function of your own"
    )


class actor_label:  # noqa: N801 - used like a function: actor_of=actor_label(1)
    """``actor_of`` taking the label at ``index``: ``actor_label(1)`` for langmem's
    ``("memories", "{user_id}")``. A namespace too short to have it is refused."""

    def __init__(self, index: int) -> None:
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ValueError(f"actor_label: index must be a whole number >= 0, not {index!r}")
        self.index = index

    def __call__(self, namespace: tuple[str, ...]) -> str:
        if len(namespace) <= self.index or not namespace[self.index]:
            raise InvalidNamespaceError(
                f"namespace {namespace!r} has no actor label at position {self.index}"
            )
        return namespace[self.index]


def to_path(namespace: Sequence[str]) -> str:
    for label in namespace:
        valid_unicode(label, "namespace label")  # a lone surrogate: named, not a codec error
        if "/" in label:
            raise InvalidNamespaceError(f"namespace label {label!r} holds '/' (memlife paths)")
    return "/" + "/".join(namespace)


def to_namespace(path: str) -> tuple[str, ...]:
    return tuple(p for p in path.split("/") if p)


def encode_value(value: dict[str, Any]) -> tuple[str, str]:
    """(content, kind): plain text for ``{"content": str}``, canonical JSON otherwise."""
    if set(value) == {"content"} and isinstance(value["content"], str) and value["content"].strip():
        return value["content"], "text"
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")), "json"


def texts_of(value: Any) -> set[str]:
    """Every string value a JSON value carries, at any depth: erased text wrapped in a dict
    with other fields is erased text still (the tombstone check reads each)."""
    if isinstance(value, dict | list):
        return set().union(*map(texts_of, value.values() if isinstance(value, dict) else value))
    return {value} if isinstance(value, str) else set()


def decode(record: MemoryRecord) -> tuple[str, dict[str, Any]]:
    """(key, value) of a record, written by this adapter or by memlife itself."""
    parts = (record.provenance.source_event or "").split(":", 2)
    if len(parts) == 3 and parts[0] == _EVENT:
        kind, key = parts[1], parts[2]
        if kind == "json":
            try:
                return key, json.loads(record.content)
            except ValueError:  # an int past the digit limit (written by a process that
                # raised it), or a text edited by hand: this item reads as its text rather
                # than failing every get and search of its prefix
                return key, {"content": record.content}
        return key, {"content": record.content}
    return record.id, {"content": record.content}


class MemlifeStore(BaseStore):
    """A LangGraph store whose items are memlife records (see the module docstring)."""

    supports_ttl = False

    def __init__(
        self,
        memory: Memory | str | None = None,
        *,
        actor_of: Callable[[tuple[str, ...]], str] = default_actor_of,
        source: Source | str = Source.agent_inferred,
        memory_type: MemoryType | str = MemoryType.semantic,
        owner: str | None = None,
    ) -> None:
        self.memory = memory if isinstance(memory, Memory) else Memory(memory)
        self._owns_memory = not isinstance(memory, Memory)
        self.actor_of = actor_of
        self.source = Source(source)
        self.memory_type = MemoryType(memory_type)
        self.owner = owner

    @property
    def store(self) -> MemoryStore:
        """The memlife MemoryStore underneath."""
        return self.memory.store

    def close(self) -> None:
        if self._owns_memory:
            self.memory.close()

    # -- BaseStore -------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise ValueError(f"unknown operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    # -- operations ------------------------------------------------------------------------
    def _locate(self, namespace: tuple[str, ...], key: str) -> MemoryRecord | None:
        """The active record behind (namespace, key), or None."""
        path = to_path(namespace)
        if no_item_has(key):
            return None
        actor = self.actor_of(namespace)
        rec = item_row(self.store, actor, path, key)[1]  # its newest value (langgraph_ids)
        if rec is None:  # a record memlife wrote itself is addressed by its id
            rec = self.store.get(key)
            if rec is not None and decode(rec)[0] != key:
                rec = None
        if rec is None or rec.status is not Status.active:
            return None
        # as search and list_namespaces show it: a namespace stored without its leading '/'
        # (written before the rule) is ("notes",) too, so an item search found, get finds
        if rec.actor_id != actor or to_namespace(rec.namespace) != namespace:
            return None
        if self.memory.long_term.expired(rec):  # as recall: past its deadline, never served
            return None
        return rec

    def _get(self, op: GetOp) -> Item | None:
        rec = self._locate(tuple(op.namespace), op.key)
        return None if rec is None else self._item(rec, Item)

    def _item(self, rec: MemoryRecord, cls: type, score: float | None = None) -> Any:
        key, value = decode(rec)
        # a naive time stored before session 26 (remember's refresh) is read as UTC
        created = stored_time(rec.created_at)
        updated = stored_time(rec.last_verified_at) or created
        kw: dict[str, Any] = {"score": score} if cls is SearchItem else {}
        kw.update(namespace=to_namespace(rec.namespace), key=key, value=value)
        return cls(**kw, created_at=created, updated_at=max(updated, created))

    def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        if not namespace:
            raise InvalidNamespaceError("namespace cannot be empty")
        if op.value is None:
            if no_item_has(op.key):
                return  # no item can have such a key: deleting it is a no-op, as for any other
            rec = self._locate(namespace, op.key)
            if rec is not None and rec.held:  # as a put: a held record is never deleted
                raise PermissionError(f"record {rec.id} is held; it cannot be deleted")
            if rec is not None and not self.memory.forget(rec.id, actor=rec.actor_id):
                again = self._locate(namespace, op.key)  # refused at the write: held since
                if again is not None and again.held:
                    raise PermissionError(f"record {rec.id} is held; it cannot be deleted")
            if rec is not None:  # an older value a restore brought back goes with the item
                older = older_values(self.store, rec.actor_id, to_path(namespace), op.key)
                gone = [r.id for r in older if r.status is Status.active and not r.held]
                if gone:  # else it was served again once the item was deleted (audit 53r1)
                    self.memory.forget(gone, actor=rec.actor_id)
            return
        key = check_key(op.key)  # first: a message below may quote it
        path, actor = to_path(namespace), self.actor_of(namespace)
        try:  # as remember, recall, import: "u1 " or "\uff551" is a second u1 that `erase
            actor_arg(actor)  # --actor u1` misses and recall (so every search over it) refuses
        except InputError as exc:
            raise InvalidNamespaceError(f"the namespace's actor label: {exc}") from None
        if bad := new_namespace_problem(path):  # as remember, import: no glob, no lookalike
            raise InvalidNamespaceError(f"namespace {namespace!r} {bad}")
        problem = json_problem(dict(op.value))
        if problem is not None:
            raise InputError(
                f"item {key!r} in namespace {namespace!r}: the value holds {problem}, which "
                "JSON cannot carry exactly (it would not read back as written); use string "
                "keys, lists and finite numbers"
            )
        content, kind = encode_value(dict(op.value))
        texts = {t for t in texts_of(dict(op.value)) if t.strip() and t != content}
        limit = self.memory.long_term.content_max_bytes
        size = len(content.encode("utf-8"))
        if size > limit:  # the bound remember and import apply (policy limits.content_max_bytes)
            raise InputError(
                f"item {op.key!r} in namespace {namespace!r}: value is {size} bytes stored, "
                f"over the limit of {limit} (policy limits.content_max_bytes)"
            )
        # a record memlife wrote itself is addressed by its id: a put replaces it, not a twin
        native = self._locate(namespace, op.key)
        rid = native.id if native is not None else item_row(self.store, actor, path, op.key)[0]
        expires = ttl_deadline(utcnow(), op.ttl, key)  # never an OverflowError (audit 53tm)
        for _ in range(_PUT_ATTEMPTS):
            existing = self.store.get(rid)
            if existing is not None and existing.status in HISTORY:  # a night's since the read:
                rid = item_row(self.store, actor, path, op.key)[0]  # never written over
                continue
            if existing is not None and existing.held:
                raise PermissionError(f"record {rid} is held; it cannot be rewritten")
            now = utcnow()
            # an item gone from the view (deleted, expired, superseded): the put makes a new one
            kept = existing if existing is not None and existing.status is Status.active and not (
                self.memory.long_term.expired(existing)) else None  # fmt: skip
            record = MemoryRecord(
                id=rid, actor_id=actor, namespace=path, memory_type=self.memory_type,
                subject=kept.subject if kept else None, content=content,
                owner=self.owner, confidence=1.0, source=self.source,
                created_at=stored_time(kept.created_at) if kept else now,
                access_count=kept.access_count if kept else 0,
                last_accessed_at=stored_time(kept.last_accessed_at) if kept else None,
                last_verified_at=now, expires_at=expires, status=Status.active,
                retention_class=existing.retention_class if existing else RetentionClass.standard,
                provenance=Provenance(
                    source_event=f"{_EVENT}:{kind}:{op.key}", content_sha256=content_sha256(content)
                ),
            )  # fmt: skip
            result = self._write(record, existing, texts)
            if rid in result.succeeded:
                break
            code = result.failed[0].code if result.failed else "NOT_STORED"
            if code in (ERASED_CONTENT, ERASED_SOURCE):  # erased content never returns (inv. 11)
                raise PermissionError(f"{code}: this content was erased for actor {actor}")
            if code == HELD:  # a hold placed since the read (invariant 1)
                raise PermissionError(f"record {rid} is held; it cannot be rewritten")
            if code != CHANGED:
                why = "; ".join(f"{f.code}: {f.message}" for f in result.failed) or code
                raise RuntimeError(f"store refused record {rid}: {why}")
        else:
            raise RuntimeError(f"record {rid} kept changing under the put; try again")

    def _write(
        self, record: MemoryRecord, existing: MemoryRecord | None, texts: set[str]
    ) -> BatchResult:
        """Write ``record`` over the row as read (``existing``) unless a tombstone forbids its
        content or a ``texts`` item (SQLite: in the write's transaction, CHANGED: read again;
        other stores: right before an upsert). A loaded recall index is kept in step."""
        blank = {"provenance": Provenance()}  # a probe: ``record`` holding one of the texts
        probes = [record.model_copy(update={**blank, "content": t}) for t in texts]
        lt, key = self.memory.long_term, (record.actor_id, record.namespace)
        with lt._lock:
            lt._check_marker()
            before, started, shard = lt._marker(), utcnow(), lt._shards.get(key)
            old = lt._share(record.id) if shard is not None and record.id in shard.row_of else None
            if isinstance(store := self.store, SqliteStore):
                # one transaction checks the texts and writes (put_if_unchanged's joins it)
                with store.lock, store.transaction() if probes else nullcontext():
                    sha = existing.sha256 if existing is not None else None
                    code = next((c for p in probes if (c := store.tombstone_refusal(p))), None)
                    result = store.put_if_unchanged(record, sha) if code is None else BatchResult()
            else:
                code = next((c for p in [record, *probes] if (c := refusal(store, p))), None)
                result = store.put_many([record]) if code is None else BatchResult()
            if code is not None:
                return BatchResult(failed=[ItemFailure(record.id, code, retryable=False)])
            if record.id not in result.succeeded:
                return result
            if shard is not None and lt._shards.get(key) is shard:
                shard.drop(record.id, old)  # the row as it was (absent: no-op)
                vector = lt._embed_loaded(record.actor_id, [record], started)[0]
                shard.append(record.id, record.content, vector, record.created_at)
                shard.shift(lt._share(record.id))
            if (names := lt._namespaces.get(record.actor_id)) is not None:
                names[1].add(record.namespace)
            lt._own_write(before)
        return result

    def _scope(self, prefix: tuple[str, ...]) -> list[tuple[str, str]]:
        """(actor, path) pairs whose namespace starts with ``prefix``."""
        if prefix:
            to_path(prefix)
        actors = [self.actor_of(prefix)] if prefix and self._actor_fixed(prefix) else None
        out = []
        for actor in actors if actors is not None else list(self.store.list_actors()):
            for path in self.store.list_namespaces(actor):
                if to_namespace(path)[: len(prefix)] == prefix and self._mapped(actor, path):
                    out.append((actor, path))
        return sorted(out, key=lambda p: (to_namespace(p[1]), p[0]))

    def _mapped(self, actor: str, path: str) -> bool:
        """Whether ``path``'s records may be ``actor``'s items: not when ``actor_of`` names
        another actor for it (as ``get`` refuses them); an unmapped path is listed."""
        try:
            return self.actor_of(to_namespace(path)) == actor
        except (InvalidNamespaceError, LookupError):
            return True

    def _actor_fixed(self, prefix: tuple[str, ...]) -> bool:
        """Whether every namespace under ``prefix`` has the same actor (known mappings)."""
        if isinstance(self.actor_of, actor_label):
            return len(prefix) > self.actor_of.index
        return self.actor_of is default_actor_of and len(prefix) >= 2 and prefix[0] == "users"

    def _search(self, op: SearchOp) -> list[SearchItem]:
        scope = self._scope(tuple(op.namespace_prefix))
        want = op.offset + op.limit
        long_term = self.memory.long_term
        if op.query:
            recall = functools.partial(long_term.recall, threshold=-1.0, log=False)
            scored: list[tuple[float, MemoryRecord]] = []
            for actor, path in scope:
                # threshold -1: rank everything, as LangGraph stores do. A filter applies to
                # the ranked list: deeper until ``want`` items pass or none are left unranked
                k = want
                while True:
                    hits = recall(actor, op.query, k=k, namespace=path)
                    passed = [(h.score, h.record) for h in hits
                              if self._keep(h.record, op.filter) and self._shown(h.record)]  # fmt: skip
                    if len(passed) >= want or len(hits) < k:
                        break
                    k *= 4
                scored += passed
            scored.sort(key=lambda s: -s[0])
            kept = scored[op.offset : want]
            # only what is returned was accessed: the ledger is what nightly scoring reads
            qsha, at, ledger = query_sha256(op.query), utcnow(), long_term.ledger
            for i, (_, r) in enumerate(kept, start=op.offset + 1):
                ledger.append(r.actor_id, r.namespace, r.id, rank=i, query_sha256=qsha, at=at)
            return [self._item(r, SearchItem, s) for s, r in kept]
        items: list[SearchItem] = []
        now = utcnow()
        for actor, path in scope:  # scope is in namespace order; keys sorted within one
            records = [
                r
                for page in iter_shard(self.store, actor, path, statuses=(Status.active,))
                for r in page.records
                if r.status is Status.active
                and not long_term.expired(r, now)  # as recall: past its deadline, never served
                and self._keep(r, op.filter)
            ]
            records.sort(key=lambda r: decode(r)[0])
            for r in records:  # checked up to ``want`` only: one batched read each
                if len(items) >= want:
                    break
                if self._shown(r):
                    items.append(self._item(r, SearchItem))
            if len(items) >= want:
                break
        return items[op.offset : want]

    def _shown(self, rec: MemoryRecord) -> bool:
        """Not a value of its key that a newer one hides: a search shows what ``get`` reads,
        one value per key (a quarantine restore may bring an older slot back; audit 53r1)."""
        return not shadowed(self.store, rec)

    @staticmethod
    def _keep(rec: MemoryRecord, filter_: dict[str, Any] | None) -> bool:
        value = decode(rec)[1] if filter_ else {}
        return all(matches(value.get(k), v) for k, v in (filter_ or {}).items())

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = {
            to_namespace(path)
            for actor in self.store.list_actors()
            for path in self.store.list_namespaces(actor)
            if self._has_active(actor, path)
        }
        if op.match_conditions:
            found = {ns for ns in found if all(ns_matches(c, ns) for c in op.match_conditions)}
        if op.max_depth is not None:
            found = {ns[: op.max_depth] for ns in found}
        return sorted(found)[op.offset : op.offset + op.limit]

    def _has_active(self, actor: str, path: str) -> bool:
        pages = iter_shard(self.store, actor, path, page_size=50, statuses=(Status.active,))
        expired = self.memory.long_term.expired
        return any(
            r.status is Status.active and not expired(r) and self._shown(r)
            for page in pages
            for r in page.records
        )
