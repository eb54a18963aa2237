"""LangGraph ``BaseStore`` over a memlife store: LangGraph agents get the lifecycle for free.

``pip install 'memlife[langgraph]'``, then::

    from memlife.integrations.langgraph import MemlifeStore
    graph = builder.compile(store=MemlifeStore("sqlite:///agent.db"))

Mapping (one memlife record per LangGraph item):

- namespace ``("users", "u1", "prefs")`` is the memlife namespace ``/users/u1/prefs``;
  the actor is ``actor_of(namespace)``: by default the label after a leading ``"users"``;
  any other namespace needs an explicit ``actor_of`` (``actor_label(1)`` for langmem's
  ``("memories", "{user_id}")``), never a guess. A label holding ``/`` is refused.
- the record id is derived from (actor, namespace, key), so a second ``put`` updates the
  same record; the key is kept in ``provenance.source_event`` (``langgraph:<kind>:<key>``).
  A key is a string of at most :data:`KEY_MAX_CHARS` (256) characters, the bound of the
  record's own identifiers (``id``, ``actor_id``; ``subject`` and ``owner`` too): a longer
  one is refused, by its length, never quoted.
- the value: ``{"content": "text"}`` is stored as the text itself; any other dict as its
  canonical JSON, which reads back exactly as written: a value JSON cannot carry exactly
  (a non-string dict key, a tuple, a set, bytes, NaN or infinity) is refused, saying
  which. LangGraph's InMemoryStore keeps such Python objects as given (``{1: "a"}`` with
  its int key); a JSON store would hand back something else (``{"1": "a"}``). A record
  that memlife wrote itself (``remember``, or a consolidation replacement) reads back as
  ``{"content": text}`` under its record id.
- ``delete`` marks the record ``pending_delete`` (gone for get/search at once; the nightly
  run deletes it with a receipt). A ``legal_hold`` or held record is never rewritten.
- ``search(query=...)`` is memlife's hybrid recall (MiniLM + BM25), scores are the fused
  recall scores, and every item returned is written to the access ledger the nightly
  scoring reads. Without a query, items come in namespace then key order. Expired records
  (``expires_at`` or the policy's TTL) are served by neither, nor by ``get``.
- ``put`` writes only over the row it read (SQLite: one transaction checks tombstones,
  holds and that row) and within the policy's ``limits.content_max_bytes``.

After a nightly run consolidates items, the originals are superseded: ``get`` of an old
key returns None and ``search`` finds the replacement. That is the point: stale and
duplicate memories leave the agent's view.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memlife.api import Memory
from memlife.errors import InputError
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
from memlife.online.inputs import stored_time
from memlife.stores.base import BatchResult, ItemFailure, MemoryStore, iter_shard
from memlife.stores.sqlite import CHANGED, HELD, SqliteStore
from memlife.tombstones import ERASED_CONTENT, ERASED_SOURCE, refusal

_EVENT = "langgraph"
_PUT_ATTEMPTS = 5  # reads and conditional writes of one put raced by other writers
KEY_MAX_CHARS = 256  # as MemoryRecord.id and actor_id: a key names one item as an id does


def default_actor_of(namespace: tuple[str, ...]) -> str:
    """``("users", "u1", ...)`` -> ``u1``; any other namespace is refused.

    Which label names the user is the application's choice (langmem's documented
    ``("memories", "{user_id}")`` has it second, after a constant): guessing the first
    label made every user of such a namespace one actor, mixing tenants (their recall,
    their erasures). Pass ``actor_of=actor_label(i)`` or a function of your own."""
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
        if "/" in label:
            raise InvalidNamespaceError(f"namespace label {label!r} holds '/' (memlife paths)")
    return "/" + "/".join(namespace)


def to_namespace(path: str) -> tuple[str, ...]:
    return tuple(p for p in path.split("/") if p)


def record_id(actor: str, path: str, key: str) -> str:
    digest = hashlib.sha256(f"{actor}\x00{path}\x00{key}".encode()).hexdigest()
    return f"lg-{digest[:40]}"


def encode_value(value: dict[str, Any]) -> tuple[str, str]:
    """(content, kind): plain text for ``{"content": str}``, canonical JSON otherwise."""
    if set(value) == {"content"} and isinstance(value["content"], str) and value["content"].strip():
        return value["content"], "text"
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")), "json"


def json_problem(value: Any) -> str | None:
    """What in ``value`` JSON cannot carry exactly (it would read back as something else,
    or not at all), or None: JSON has string keys, lists and finite numbers only."""
    try:
        if value is None or isinstance(value, str | bool | int):
            return None
        if isinstance(value, float):
            return None if math.isfinite(value) else f"a float {value}"
        if isinstance(value, list):
            return next((p for v in value if (p := json_problem(v))), None)
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    return f"a {type(k).__name__} dict key"
                if problem := json_problem(v):
                    return problem
            return None
    except RecursionError:
        return "values nested too deeply"
    return f"a {type(value).__name__}"


def check_key(key: object) -> str:
    """``key`` when it is a string of at most :data:`KEY_MAX_CHARS` characters; else an
    InputError naming its type or length (never quoting it)."""
    if not isinstance(key, str):
        raise InputError(f"item key: a {type(key).__name__}; expected a string")
    if len(key) > KEY_MAX_CHARS:
        raise InputError(
            f"item key: {len(key)} characters, over the limit of {KEY_MAX_CHARS} "
            "(the bound of a record id)"
        )
    return key


def decode(record: MemoryRecord) -> tuple[str, dict[str, Any]]:
    """(key, value) of a record, written by this adapter or by memlife itself."""
    event = record.provenance.source_event or ""
    parts = event.split(":", 2)
    if len(parts) == 3 and parts[0] == _EVENT:
        kind, key = parts[1], parts[2]
        if kind == "json":
            return key, json.loads(record.content)
        return key, {"content": record.content}
    return record.id, {"content": record.content}


def _matches(value: Any, expected: Any) -> bool:
    """LangGraph's filter semantics: equality, nested dicts, and $eq/$ne/$gt/$gte/$lt/$lte."""
    if isinstance(expected, dict):
        if any(k.startswith("$") for k in expected):
            return all(_operator(value, op, arg) for op, arg in expected.items())
        return isinstance(value, dict) and all(
            _matches(value.get(k), v) for k, v in expected.items()
        )
    return bool(value == expected)


def _operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(value == arg)
    if op == "$ne":
        return bool(value != arg)
    if value is None:
        return False
    compare = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__, "$lte": float.__le__}
    if op not in compare:
        raise ValueError(f"unsupported filter operator {op!r}")
    return compare[op](float(value), float(arg))


def _ns_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    else:
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    return all(p == "*" or n == p for n, p in pairs)


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
        actor = self.actor_of(namespace)
        rec = self.store.get(record_id(actor, path, key))
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
        kw: dict[str, Any] = dict(
            namespace=to_namespace(rec.namespace),
            key=key,
            value=value,
            created_at=created,
            updated_at=max(updated, created),
        )
        if cls is SearchItem:
            kw["score"] = score
        return cls(**kw)

    def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        if not namespace:
            raise InvalidNamespaceError("namespace cannot be empty")
        if op.value is None:
            if not isinstance(op.key, str) or len(op.key) > KEY_MAX_CHARS:
                return  # no item can have such a key: deleting it is a no-op, as for any other
            rec = self._locate(namespace, op.key)
            if rec is not None and rec.held:  # as a put: a held record is never deleted
                raise PermissionError(f"record {rec.id} is held; it cannot be deleted")
            if rec is not None and not self.memory.forget(rec.id, actor=rec.actor_id):
                again = self._locate(namespace, op.key)  # refused at the write: held since
                if again is not None and again.held:
                    raise PermissionError(f"record {rec.id} is held; it cannot be deleted")
            return
        key = check_key(op.key)  # first: a message below may quote it
        path, actor = to_path(namespace), self.actor_of(namespace)
        problem = json_problem(dict(op.value))
        if problem is not None:
            raise InputError(
                f"item {key!r} in namespace {namespace!r}: the value holds {problem}, which "
                "JSON cannot carry exactly (it would not read back as written); use string "
                "keys, lists and finite numbers"
            )
        content, kind = encode_value(dict(op.value))
        limit = self.memory.long_term.content_max_bytes
        size = len(content.encode("utf-8"))
        if size > limit:  # the bound remember and import apply (policy limits.content_max_bytes)
            raise InputError(
                f"item {op.key!r} in namespace {namespace!r}: value is {size} bytes stored, "
                f"over the limit of {limit} (policy limits.content_max_bytes)"
            )
        # a record memlife wrote itself is addressed by its id: a put replaces it, not a twin
        native = self._locate(namespace, op.key)
        rid = native.id if native is not None else record_id(actor, path, op.key)
        expires = utcnow() + timedelta(minutes=op.ttl) if isinstance(op.ttl, int | float) else None
        for _ in range(_PUT_ATTEMPTS):
            existing = self.store.get(rid)
            if existing is not None and existing.held:
                raise PermissionError(f"record {rid} is held; it cannot be rewritten")
            now = utcnow()
            record = MemoryRecord(
                id=rid,
                actor_id=actor,
                namespace=path,
                memory_type=self.memory_type,
                subject=existing.subject if existing else None,
                content=content,
                owner=self.owner,
                confidence=1.0,
                source=self.source,
                created_at=stored_time(existing.created_at) if existing else now,
                access_count=existing.access_count if existing else 0,
                last_accessed_at=stored_time(existing.last_accessed_at) if existing else None,
                last_verified_at=now,
                expires_at=expires,
                retention_class=existing.retention_class if existing else RetentionClass.standard,
                status=Status.active,
                provenance=Provenance(
                    source_event=f"{_EVENT}:{kind}:{op.key}", content_sha256=content_sha256(content)
                ),
            )
            result = self._write(record, existing)
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
        self.memory.long_term.invalidate(actor)  # the recall index picks the change up

    def _write(self, record: MemoryRecord, existing: MemoryRecord | None) -> BatchResult:
        """Write ``record`` only over the row as read (``existing``): SQLite checks tombstones,
        holds and that row in the write's own transaction (CHANGED: read again). Other stores
        have no such transaction: tombstones are checked right before an upsert (weaker)."""
        if isinstance(self.store, SqliteStore):
            return self.store.put_if_unchanged(
                record, None if existing is None else existing.sha256
            )
        code = refusal(self.store, record)
        if code is not None:
            return BatchResult(failed=[ItemFailure(record.id, code, retryable=False)])
        return self.store.put_many([record])

    def _scope(self, prefix: tuple[str, ...]) -> list[tuple[str, str]]:
        """(actor, path) pairs whose namespace starts with ``prefix``."""
        if prefix:
            to_path(prefix)
        actors = [self.actor_of(prefix)] if prefix and self._actor_fixed(prefix) else None
        out = []
        for actor in actors if actors is not None else list(self.store.list_actors()):
            for path in self.store.list_namespaces(actor):
                if to_namespace(path)[: len(prefix)] == prefix:
                    out.append((actor, path))
        return sorted(out, key=lambda p: (to_namespace(p[1]), p[0]))

    def _actor_fixed(self, prefix: tuple[str, ...]) -> bool:
        """Whether every namespace under ``prefix`` has the same actor (known mappings)."""
        if isinstance(self.actor_of, actor_label):
            return len(prefix) > self.actor_of.index
        if self.actor_of is not default_actor_of:
            return False
        return len(prefix) >= 2 and prefix[0] == "users"

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        scope = self._scope(prefix)
        want = op.offset + op.limit
        long_term = self.memory.long_term
        if op.query:
            scored: list[tuple[float, MemoryRecord]] = []
            for actor, path in scope:
                # threshold -1: rank everything, as LangGraph stores do; filters apply after
                n = want if not op.filter else 1000
                for hit in long_term.recall(
                    actor, op.query, k=n, namespace=path, threshold=-1.0, log=False
                ):
                    scored.append((hit.score, hit.record))
            scored.sort(key=lambda s: -s[0])
            kept = [(s, r) for s, r in scored if self._keep(r, op.filter)][op.offset : want]
            # only what is returned was accessed: the ledger is what nightly scoring reads
            qsha, at = query_sha256(op.query), utcnow()
            for i, (_, r) in enumerate(kept, start=op.offset + 1):
                long_term.ledger.append(
                    r.actor_id, r.namespace, r.id, rank=i, query_sha256=qsha, at=at
                )
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
            items += [
                self._item(r, SearchItem) for r in sorted(records, key=lambda r: decode(r)[0])
            ]
            if len(items) >= want:
                break
        return items[op.offset : want]

    @staticmethod
    def _keep(rec: MemoryRecord, filter_: dict[str, Any] | None) -> bool:
        if not filter_:
            return True
        value = decode(rec)[1]
        return all(_matches(value.get(k), v) for k, v in filter_.items())

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = {
            to_namespace(path)
            for actor in self.store.list_actors()
            for path in self.store.list_namespaces(actor)
            if self._has_active(actor, path)
        }
        if op.match_conditions:
            found = {ns for ns in found if all(_ns_matches(c, ns) for c in op.match_conditions)}
        if op.max_depth is not None:
            found = {ns[: op.max_depth] for ns in found}
        return sorted(found)[op.offset : op.offset + op.limit]

    def _has_active(self, actor: str, path: str) -> bool:
        for page in iter_shard(self.store, actor, path, page_size=50, statuses=(Status.active,)):
            if any(r.status is Status.active for r in page.records):
                return True
        return False
