"""``AgentCoreStore``: the MemoryStore over one AgentCore memory plus the DynamoDB sidecar.

Reads: ListMemoryRecords pages (filtered on metadata), GetMemoryRecord per id (no batch
get exists; a few in flight). Writes: sidecar first, then AgentCore, then the sidecar's
ids (package docstring: "Write path"). Translation lives in ``mapping``, request plumbing
in ``transport``, the write path in ``writes``, strategy templates in ``namespaces``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from memlife.model import MemoryRecord, Status, utcnow
from memlife.settings import DEFAULT_AGENTCORE_REGION, aws_region
from memlife.stores.agentcore.cache import ReadCache
from memlife.stores.agentcore.errors import check_advances, store_error
from memlife.stores.agentcore.mapping import (
    ID_KEY,
    INDEXED_KEYS,
    MAX_PAGE,
    MEMORY_RECORD_ID_RE,
    OVERFLOW_KEY,
    decode_native,
    decode_record,
    decode_token,
    encode_token,
    first_namespace,
    invalid_reason,
    is_ours,
    meta_value,
    safe_value,
)
from memlife.stores.agentcore.namespaces import Strategies
from memlife.stores.agentcore.transport import Transport, in_chunks, keeping_partial
from memlife.stores.agentcore.writes import ChunkWriter, drop_stale_blobs
from memlife.stores.agentcore_sidecar import Sidecar, SidecarItem
from memlife.stores.base import (
    DEFAULT_PAGE_SIZE,
    BatchResult,
    ItemFailure,
    Page,
    StoreError,
    iter_shard,
)

MAX_LIST_CALLS_PER_PAGE = 50
GET_WORKERS = 8  # parallel GetMemoryRecord calls in set_status / get_many
URL_PARAMS = frozenset(
    "region endpoint_url control_endpoint_url sidecar_table sidecar_endpoint_url "
    "max_attempts strategy_id".split()
)

# What _fetch finds per id: record, memoryRecordId, sidecar item (None when read by a
# cached location), native expiresAt.
Found = tuple[MemoryRecord, str, SidecarItem | None, datetime | None]


class AgentCoreStore:
    """MemoryStore over one AgentCore memory plus a DynamoDB sidecar table."""

    def __init__(
        self,
        memory_id: str,
        *,
        region: str = DEFAULT_AGENTCORE_REGION,
        sidecar_table: str = "memlife-agentcore-sidecar",
        endpoint_url: str | None = None,
        control_endpoint_url: str | None = None,
        sidecar_endpoint_url: str | None = None,
        max_attempts: int = 5,
        item_retries: int = 4,
        retry_base_s: float = 0.2,
        strategy_id: str | None = None,
        session: boto3.session.Session | None = None,
        clients: tuple[Any, Any, Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        """``clients``: ready (data plane, control plane, DynamoDB) boto3 clients to share
        (client creation costs ~0.1 s each); otherwise they are built here."""
        self.memory_id = memory_id
        self.region = region
        self.strategy_id = strategy_id
        query: dict[str, str] = {"region": region, "sidecar_table": sidecar_table}
        for k, v in (
            ("endpoint_url", endpoint_url),
            ("control_endpoint_url", control_endpoint_url),
            ("sidecar_endpoint_url", sidecar_endpoint_url),
            ("strategy_id", strategy_id),
        ):
            if v:
                query[k] = v
        self.url = f"agentcore://{memory_id}?{urlencode(query)}"
        self._memory: dict[str, Any] | None = None
        self._strategies: tuple[dict[str, Any], Strategies] | None = None
        self._cache = ReadCache()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        if clients is not None:
            self.client, self.control, ddb = clients
        else:
            session = session or boto3.session.Session(region_name=region)
            config = Config(
                retries={"mode": "standard", "max_attempts": max_attempts},
                parameter_validation=True,
                connect_timeout=5,
                read_timeout=30,
            )
            self.client = session.client(
                "bedrock-agentcore", region_name=region, endpoint_url=endpoint_url, config=config
            )
            self.control = session.client(
                "bedrock-agentcore-control",
                region_name=region,
                endpoint_url=control_endpoint_url or endpoint_url,
                config=config,
            )
            ddb = session.client(
                "dynamodb", region_name=region, endpoint_url=sidecar_endpoint_url, config=config
            )
        self.sidecar = Sidecar(ddb, sidecar_table)
        self.transport = Transport(
            self.client,
            memory_id,
            item_retries=item_retries,
            retry_base_s=retry_base_s,
            sleep=sleep,
        )
        self._writer = ChunkWriter(
            self.sidecar,
            self.transport,
            self._cache,
            strategy_id=strategy_id,
        )

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> AgentCoreStore:
        parsed = urlparse(url)
        if parsed.scheme != "agentcore" or not parsed.netloc:
            raise ValueError(f"store URL {url!r}: expected agentcore://MEMORY_ID?region=...")
        params = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        unknown = set(params) - URL_PARAMS
        if unknown:
            raise ValueError(f"store URL {url!r}: unknown parameter(s) {sorted(unknown)}")
        opts: dict[str, Any] = dict(params)
        # As store_identity reads it: AWS_REGION before the default, so one memory is one store.
        opts["region"] = aws_region(params.get("region")) or DEFAULT_AGENTCORE_REGION
        if "max_attempts" in opts:
            opts["max_attempts"] = int(opts["max_attempts"])
        opts.update(kwargs)
        return cls(parsed.netloc, **opts)  # netloc, not hostname: memory ids are case-sensitive

    # -- memory configuration (control plane) ----------------------------------------------
    def memory(self) -> dict[str, Any]:
        """GetMemory, cached: strategies (namespace templates) and indexedKeys."""
        if self._memory is None:
            try:
                self._memory = self.control.get_memory(memoryId=self.memory_id)["memory"]
            except ClientError as exc:
                raise store_error(exc, "GetMemory") from None
        return self._memory

    def strategies(self) -> Strategies:
        """The memory's strategies (one view per GetMemory answer: it caches namespaces)."""
        memory = self.memory()
        cached = self._strategies
        if cached is None or cached[0] is not memory:
            cached = self._strategies = (memory, Strategies(memory))
        return cached[1]

    def missing_indexed_keys(self) -> list[str]:
        """Keys of ``INDEXED_KEYS`` the memory does not declare (a deployment check)."""
        declared = {k["key"] for k in self.memory().get("indexedKeys") or []}
        return [k["key"] for k in INDEXED_KEYS if k["key"] not in declared]

    # -- reads -----------------------------------------------------------------------------
    def list_actors(self) -> Iterator[str]:
        """ListActors (actors with events) plus the actors written through this store."""
        actors = set(self.sidecar.actors())
        kwargs: dict[str, Any] = {"memoryId": self.memory_id, "maxResults": MAX_PAGE}
        while True:
            try:
                resp = self.client.list_actors(**kwargs)
            except ClientError as exc:
                raise store_error(exc, "ListActors") from None
            actors.update(a["actorId"] for a in resp.get("actorSummaries", []))
            if not resp.get("nextToken"):
                break
            check_advances("ListActors", kwargs.get("nextToken"), resp["nextToken"])
            kwargs["nextToken"] = resp["nextToken"]
        return iter(sorted(actors))

    def list_namespaces(self, actor_id: str) -> list[str]:
        """Namespaces written for the actor, the strategies' templates resolved for it, and
        the namespaces the service filled in under the actor's part of a template with a
        session (or other) slot, each read back as this actor's.

        A namespace may be listed after its last record was deleted (paging it is cheap).
        """
        found = set(self.sidecar.namespaces(actor_id))
        strategies = self.strategies()
        found.update(strategies.resolved_for(actor_id))
        for path in strategies.open_prefixes(actor_id):  # sessions: what the service wrote
            under = self.transport.namespaces_under(path)
            found.update(ns for ns in under if strategies.actor_of(ns) == actor_id)
        return sorted(found)

    def page(
        self,
        actor_id: str,
        namespace: str,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        token: str | None = None,
        statuses: Sequence[Status] | None = None,
    ) -> Page:
        if page_size < 1:
            raise ValueError("page_size must be >= 1")
        service_token = decode_token(token, self.memory_id, actor_id, namespace) if token else None
        wanted = {Status(s).value for s in statuses} if statuses else None
        actor_key = safe_value(actor_id)
        native_ok: bool | None = None  # computed on first native record
        kept: list[dict[str, Any]] = []
        calls, asked = 0, {service_token}  # every cursor this call sent: none comes back
        while True:
            kwargs: dict[str, Any] = {
                "memoryId": self.memory_id,
                "namespace": namespace,
                "maxResults": min(MAX_PAGE, page_size - len(kept)),
            }
            if service_token:
                kwargs["nextToken"] = service_token
            try:
                resp = self.client.list_memory_records(**kwargs)
            except ClientError as exc:
                raise store_error(exc, "ListMemoryRecords") from None
            calls += 1
            for s in resp.get("memoryRecordSummaries", []):
                meta = s.get("metadata") or {}
                if ID_KEY in meta:
                    # cheap pre-filter on metadata before any sidecar read
                    if meta_value(meta, "actor_id") != actor_key:
                        continue
                    if wanted and meta_value(meta, "status") not in wanted:
                        continue
                else:
                    if native_ok is None:
                        native_ok = self.strategies().actor_owns(actor_id, namespace)
                    if not native_ok or (wanted and Status.active.value not in wanted):
                        continue
                kept.append(s)
            check_advances("ListMemoryRecords", asked, resp.get("nextToken"))
            service_token = resp.get("nextToken")
            asked.add(service_token)
            if not service_token or len(kept) >= page_size or calls >= MAX_LIST_CALLS_PER_PAGE:
                break
        records = self._decode_many(kept, actor_id)
        records = [r for r in records if r.actor_id == actor_id]  # digest collision guard
        nxt = (
            encode_token(self.memory_id, actor_id, namespace, service_token)
            if service_token
            else None
        )
        return Page(records, nxt)

    def get(self, record_id: str) -> MemoryRecord | None:
        """GetMemoryRecord; a native TTL (``expiresAt``, only GetMemoryRecord returns it)
        shows as ``expires_at`` when the record has no lifecycle deadline of its own."""
        found = self._fetch([record_id])
        if record_id not in found:
            return None
        rec, _, _, native_expiry = found[record_id]
        if native_expiry is not None and rec.expires_at is None:
            rec = rec.model_copy(update={"expires_at": native_expiry.astimezone(UTC)})
        return rec

    def get_many(self, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        return {rid: rec for rid, (rec, _, _, _) in self._fetch(ids).items()}

    def iter_all(self, batch: int = MAX_PAGE) -> Iterator[MemoryRecord]:
        """Every record (export), actor by actor and namespace by namespace, streamed."""
        for actor in self.list_actors():
            for ns in self.list_namespaces(actor):
                for page in iter_shard(self, actor, ns, page_size=batch):  # each record once
                    yield from page.records

    def native_ids(self, ids: Sequence[str]) -> dict[str, str]:
        """memlife id -> AgentCore memoryRecordId for records this store has read or written.

        CloudTrail data events name records by memoryRecordId; the pipeline uses this to
        credit those accesses to our ids (see run_planning.iter_views).
        """
        return {i: where[0] for i, where in self._cache.locations(ids).items()}

    # -- decoding --------------------------------------------------------------------------
    def _decode_many(
        self, raws: Sequence[dict[str, Any]], actor_hint: str | None
    ) -> list[MemoryRecord]:
        keys = []
        for r in raws:
            meta = r.get("metadata") or {}
            if ID_KEY in meta:  # a record of ours, live where AgentCore listed it
                self._cache.remember(
                    meta_value(meta, ID_KEY), r["memoryRecordId"], first_namespace(r)
                )
                want = meta_value(meta, OVERFLOW_KEY)
                if want and self._cache.blob(want) is None:
                    keys.append(meta_value(meta, ID_KEY))
        items = self.sidecar.get_many(keys) if keys else {}
        for it in items.values():
            self._cache.remember_blobs(it.blobs)
        out = []
        for r in raws:
            meta = r.get("metadata") or {}
            item = items.get(meta_value(meta, ID_KEY)) if meta else None
            out.append(self._decode(r, item, actor_hint))
        return out

    def _decode(
        self, raw: dict[str, Any], item: SidecarItem | None, actor_hint: str | None
    ) -> MemoryRecord:
        if not is_ours(raw):
            return self._decode_native(raw, actor_hint)
        want = meta_value(raw["metadata"], OVERFLOW_KEY)
        blob = None
        if want:
            blob = self._cache.blob(want) or (item.blobs if item else {}).get(want)
            if blob is None:
                raise StoreError(
                    f"AgentCore record {raw['memoryRecordId']}: its overflow {want[:12]} "
                    "is not in the sidecar",
                    code="SIDECAR_MISMATCH",
                )
        return decode_record(raw, blob)

    def _decode_native(self, raw: dict[str, Any], actor_hint: str | None) -> MemoryRecord:
        """A native record's actor is the one its namespace's template names (the reading
        ``page`` lists it under), else the one the caller or the sidecar established
        (``actor_hint``). Never a guess: a record decoded with a made-up actor would be
        written back under it by ``set_status`` and leave its actor."""
        strategies = self.strategies()
        ns = first_namespace(raw)
        actor = strategies.actor_of(ns) or actor_hint
        if not actor:
            raise StoreError(
                f"AgentCore record {raw.get('memoryRecordId')}: no strategy namespace template "
                f"names the actor of namespace {ns!r}, and memlife never wrote it",
                code="NATIVE_ACTOR_UNKNOWN",
            )
        return decode_native(raw, actor, strategies.type_of(raw.get("memoryStrategyId")))

    # -- id resolution ---------------------------------------------------------------------
    def _fetch(self, ids: Sequence[str], *, for_write: bool = False) -> dict[str, Found]:
        """Our id -> (record, memoryRecordId, sidecar item, native expiresAt), if it exists.

        Reads (``for_write=False``) go straight to GetMemoryRecord when the record's
        location is known (from a listing or an earlier read/write of this store): the
        answer is AgentCore's current record either way, a location is immutable while the
        record lives, and a stale one (deleted, moved, re-created) fails the check and falls
        back to the sidecar. The sidecar item is then ``None``. Writes (``set_status``) read
        the sidecar every time: they need its current version.
        """
        keys = {rid: safe_value(rid) for rid in dict.fromkeys(ids)}
        by_key = {} if for_write else self._cache.locations(keys.values())
        where = {rid: by_key[k] for rid, k in keys.items() if k in by_key}
        items = self.sidecar.get_many([k for rid, k in keys.items() if rid not in where])
        out: dict[str, Found] = {}

        def one(rid: str) -> None:
            key = keys[rid]
            hit = where.get(rid)
            if hit is not None:
                found = self._read_cached(key, *hit)
                if found is not None:
                    out[rid] = found
                    return
                self._cache.forget([key])
                item = self.sidecar.get(key)
            else:
                item = items.get(key)
            if item is not None and item.pending:
                item.memory_record_id = self.transport.find_by_key(item.namespace, item.key)
            if item is not None and item.memory_record_id:
                self._cache.remember_blobs(item.blobs)
                raw = self.transport.get(item.memory_record_id, item.namespace)
                if raw is not None:
                    rec = self._decode(raw, item, item.actor_id)
                    out[rid] = (rec, item.memory_record_id, item, raw.get("expiresAt"))
                    self._cache.remember(key, item.memory_record_id, item.namespace)
            elif item is None and MEMORY_RECORD_ID_RE.fullmatch(rid):
                raw = self.transport.get(rid, None)  # a native record: our id is its id
                if raw is not None and not is_ours(raw):
                    out[rid] = (self._decode_native(raw, None), rid, None, None)

        if len(keys) <= 1:
            for rid in keys:
                one(rid)
        else:  # one GetMemoryRecord per record (no batch get exists): a few in flight
            list(self._executor().map(one, keys))
        return out

    def _read_cached(self, key: str, memory_record_id: str, namespace: str) -> Found | None:
        """The record at a cached location, if it is still ours and decodable from cache."""
        raw = self.transport.get(memory_record_id, namespace, quiet=True)
        if raw is None:
            return None
        meta = raw.get("metadata") or {}
        want = meta_value(meta, OVERFLOW_KEY)
        if meta_value(meta, ID_KEY) != key or (want and self._cache.blob(want) is None):
            return None
        return self._decode(raw, None, None), memory_record_id, None, raw.get("expiresAt")

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(GET_WORKERS, thread_name_prefix="agentcore-get")
            return self._pool

    # -- writes ----------------------------------------------------------------------------
    def put_many(self, records: Sequence[MemoryRecord]) -> BatchResult:
        """Upsert by id; per-item outcomes. Raises QuotaExceeded (with ``partial``)."""
        result = BatchResult()
        latest = list({r.id: r for r in records}.values())  # last wins, like SQL upserts
        valid: list[MemoryRecord] = []
        for r in latest:
            problem = invalid_reason(r)
            if problem:
                result.failed.append(ItemFailure(r.id, "VALIDATION", problem, retryable=False))
            else:
                valid.append(r)
        return in_chunks(valid, lambda chunk: self._writer.write(chunk, None), result)

    _invalid = staticmethod(invalid_reason)  # tests/fakes/agentcore.py seeds with this

    def set_status(
        self,
        ids: Sequence[str],
        status: Status,
        *,
        replaced_by: str | None = None,
        policy_version: str | None = None,
        at: datetime | None = None,
    ) -> BatchResult:
        """Read-modify-write (GetMemoryRecord, then BatchUpdate): AgentCore has no partial
        update, and the whole metadata map is rewritten."""
        when = at or utcnow()

        def write(chunk: list[str]) -> BatchResult:
            found = self._fetch(chunk, for_write=True)
            changed = []
            for rid in chunk:
                if rid in found:
                    rec = found[rid][0]
                    prov = rec.provenance.model_copy()
                    if replaced_by is not None or status is not Status.superseded:
                        prov.replaced_by = replaced_by
                    if policy_version is not None:
                        prov.policy_version = policy_version
                    update = {
                        "status": Status(status),
                        "status_changed_at": when,
                        "provenance": prov,
                    }
                    changed.append(rec.model_copy(update=update))
            with keeping_partial(BatchResult(missing=[r for r in chunk if r not in found])) as res:
                res.extend(self._writer.write(changed, {rid: f[2] for rid, f in found.items()}))
            return res

        return in_chunks(list(dict.fromkeys(ids)), write)

    def drop_stale_overflow(self, ids: Sequence[str]) -> int:
        """Older overflow blobs of these records go (writes.drop_stale_blobs: an erasure)."""
        return drop_stale_blobs(self.transport, self.sidecar, [safe_value(i) for i in ids])

    def delete_many(self, ids: Sequence[str]) -> BatchResult:
        """Delete by id; an id already absent (or deleted behind our back) is ``missing``."""
        return in_chunks(list(dict.fromkeys(ids)), self._writer.delete)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self.client.close()
        self.control.close()
        self.sidecar.client.close()

    def __enter__(self) -> AgentCoreStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
