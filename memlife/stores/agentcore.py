"""Amazon Bedrock AgentCore Memory as a MemoryStore (boto3 ``bedrock-agentcore``).

``agentcore://MEMORY_ID?region=us-east-1&sidecar_table=memlife-sidecar`` (optional:
``endpoint_url``, ``control_endpoint_url``, ``sidecar_endpoint_url``, ``max_attempts``,
``strategy_id``). The full mapping, with reasons, is in ``docs/agentcore.md``; in short:

Record <-> AgentCore memory record
    ``content`` -> ``content.text`` (<= 16,000 chars, else a non-retryable VALIDATION item
    failure: content never goes to the sidecar); ``namespace`` -> ``namespaces[0]`` (one
    namespace per record; AgentCore's namespace pattern or a VALIDATION failure);
    ``created_at`` -> ``timestamp`` too; everything else -> ``metadata`` per ``FIELD_MAP``.

Ids
    AgentCore assigns ``memoryRecordId`` (``mem-...``, 40-50 chars) on create; no API takes
    a client id (``requestIdentifier`` only correlates items of one batch response, and
    ``clientToken`` only makes the whole request idempotent). So our id lives in metadata
    ``memlife_id`` and the DynamoDB sidecar maps it to the ``memoryRecordId``. A record
    AgentCore extracted by itself (no ``memlife_id``) is adopted with id = its
    ``memoryRecordId`` and lifecycle defaults.

Metadata values (<= 20 keys; strings 1..256 chars of ``[a-zA-Z0-9\\s._:/=+@-]``)
    Timestamps: ISO-8601 UTC, fixed width with microseconds (``2026-01-02T10:00:00.000000Z``:
    lossless, and lexical order = time order). Numbers: ``numberValue``. Enums: their
    value. A string that does not fit (disallowed or surrounding whitespace, empty, longer
    than 256, or itself starting with ``sha256:``) is written as ``sha256:<hex>`` of the
    value (so equality filters still work) and the value goes to the sidecar blob;
    ``provenance.supersedes`` (a list) always goes there. ``memlife_overflow`` then holds
    the blob's hash: metadata is the source of truth, and a sidecar blob is used only if
    its hash matches (the sidecar is written first, keeps a few blobs, so a failed or
    concurrent AgentCore write can never pair a record with another version's overflow).

Write path (``put_many``, ``set_status``)
    sidecar conditional write (version n -> n+1; a lost race is a CONFLICT item) ->
    BatchCreate (``clientToken`` = hash of the ids, content hashes and sidecar versions of
    the batch, so a botocore retry of a lost response creates nothing twice) or
    BatchUpdate -> sidecar records the new ``memoryRecordId``. A create interrupted between
    the two is ``pending`` in the sidecar; the next touch looks the record up by its
    indexed ``memlife_id`` before creating again.

Errors
    ``ThrottledException``: botocore standard retry, then our bounded, jittered retry of
    the throttled items; still throttled -> ``ItemFailure(THROTTLED, retryable)``.
    ``ServiceQuotaExceededException`` -> ``QuotaExceeded`` (a ``StoreError`` with code
    ``QUOTA_EXCEEDED`` carrying the partial ``BatchResult``): the shard stops.
    ``ValidationException`` on a batch -> the batch is bisected until the offending
    record(s) are named as non-retryable VALIDATION items. Per-item ``errorCode`` (HTTP
    style): 404 on delete = already deleted (``missing``), 404 on update = re-create, 429
    retried, 5xx retryable, 4xx not.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from memlife.model import (
    MemoryRecord,
    MemoryType,
    Provenance,
    Source,
    Status,
    content_sha256,
    parse_time,
    utcnow,
)
from memlife.stores.agentcore_sidecar import Sidecar, SidecarItem
from memlife.stores.base import (
    DEFAULT_PAGE_SIZE,
    MAX_BATCH,
    BadPageToken,
    BatchResult,
    ItemFailure,
    Page,
    StoreError,
    chunked,
)

# -- AgentCore limits (from the botocore service model, bedrock-agentcore 2024-02-28) ----
MAX_PAGE = 100  # ListMemoryRecords / ListActors maxResults
MAX_CONTENT = 16_000  # MemoryContentTextString
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
OVERFLOW_KEY = "memlife_overflow"
KEEP_BLOBS = 4  # overflow versions kept in the sidecar (see module docstring)
MAX_LIST_CALLS_PER_PAGE = 50
GET_WORKERS = 8  # parallel GetMemoryRecord calls in set_status / get_many
LOCATION_CACHE = 200_000  # our key -> (memoryRecordId, namespace) entries kept for reads
BLOB_CACHE = 20_000  # overflow blobs kept by hash (immutable: the hash names the content)


@dataclass(frozen=True)
class FieldMap:
    """One MemoryRecord field and where it lives in AgentCore."""

    field: str  # dotted path in MemoryRecord
    key: str | None  # metadata key; None: sidecar only
    kind: str  # str | enum | ts | num | int | list
    indexed: str | None = None  # IndexedKey type to declare on the memory, if filterable


# The mapping table. id/actor/namespace/content also have dedicated places (module doc).
FIELD_MAP: tuple[FieldMap, ...] = (
    FieldMap("id", "memlife_id", "str", "STRING"),
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
_META_KEYS = [f.key for f in FIELD_MAP if f.key] + [OVERFLOW_KEY]
# The budget is full (20 of 20): a new record field must be sidecar-only (key None).
assert len(_META_KEYS) <= MAX_METADATA_KEYS and len(INDEXED_KEYS) <= MAX_INDEXED_KEYS
# Elsewhere in AgentCore: namespace -> namespaces[0], content -> content.text.
_PLACED = {"namespace", "content"} | {f.field.split(".")[0] for f in FIELD_MAP}
_UNMAPPED = set(MemoryRecord.model_fields) - _PLACED
_UNMAPPED_PROV = {f"provenance.{n}" for n in Provenance.model_fields} - {f.field for f in FIELD_MAP}
if _UNMAPPED or _UNMAPPED_PROV:  # a field added to the model must not be silently dropped
    raise ImportError(f"AgentCore FIELD_MAP misses {sorted(_UNMAPPED | _UNMAPPED_PROV)}")

# AgentCore strategy type -> our memory type, for records AgentCore extracted by itself.
_NATIVE_TYPE = {"EPISODIC": MemoryType.episodic, "SUMMARIZATION": MemoryType.episodic}


class QuotaExceeded(StoreError):
    """ServiceQuotaExceededException: stop the shard. ``partial``: what was done before."""

    def __init__(self, message: str, partial: BatchResult | None = None):
        super().__init__(message, code="QUOTA_EXCEEDED")
        self.partial = partial or BatchResult()


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
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _blob_hash(blob: dict[str, Any]) -> str:
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
    for f in FIELD_MAP:
        value = _get_path(record, f.field)
        if value is None:
            continue  # absent key = None
        if f.kind == "list":
            if value:
                blob[f.field] = list(value)
        elif f.kind == "ts":
            meta[f.key] = {"stringValue": iso(value)}  # type: ignore[index]
        elif f.kind in ("num", "int"):
            meta[f.key] = {"numberValue": float(value)}  # type: ignore[index]
        elif f.kind == "enum":
            meta[f.key] = {"stringValue": value.value}  # type: ignore[index]
        else:
            meta[f.key] = {"stringValue": safe_value(value)}  # type: ignore[index]
            if not fits_metadata(value):
                blob[f.field] = value
    if blob:
        meta[OVERFLOW_KEY] = {"stringValue": _blob_hash(blob)}
    return meta, blob


def _meta_value(meta: dict[str, Any], key: str) -> Any:
    v = meta.get(key)
    if not v:
        return None
    for k in ("stringValue", "numberValue", "stringListValue", "dateTimeValue"):
        if k in v:
            return v[k]
    return None


def decode_metadata(meta: dict[str, Any], blob: dict[str, Any] | None) -> dict[str, Any]:
    """Record fields (nested provenance) from metadata plus the matching overflow blob."""
    out: dict[str, Any] = {"provenance": {}}
    blob = blob or {}
    for f in FIELD_MAP:
        if f.field in blob:
            value = blob[f.field]
        elif f.key is None:
            continue
        else:
            value = _meta_value(meta, f.key)
            if value is None:
                continue
            if f.kind == "ts":
                value = parse_time(value)
            elif f.kind == "int":
                value = int(value)
            elif f.kind == "num":
                value = float(value)
        if f.field.startswith("provenance."):
            out["provenance"][f.field.split(".", 1)[1]] = value
        else:
            out[f.field] = value
    return out


# -- page tokens ---------------------------------------------------------------------------
def _encode_token(memory_id: str, actor: str, ns: str, service_token: str) -> str:
    payload = json.dumps([memory_id, actor, ns, service_token], separators=(",", ":"))
    check = hashlib.sha256(payload.encode()).hexdigest()[:16]  # integrity, not secrecy
    return base64.urlsafe_b64encode(f"{check}{payload}".encode()).decode()


def _decode_token(token: str, memory_id: str, actor: str, ns: str) -> str:
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


# -- error mapping -------------------------------------------------------------------------
def _err(exc: ClientError) -> tuple[str, str]:
    e = exc.response.get("Error", {})
    return str(e.get("Code", "")), str(e.get("Message", ""))


def _store_error(exc: ClientError, what: str) -> StoreError:
    code, msg = _err(exc)
    if code == "ServiceQuotaExceededException":
        return QuotaExceeded(f"{what}: AgentCore quota exceeded: {msg}")
    mapped = {
        "ThrottledException": "THROTTLED",
        "AccessDeniedException": "ACCESS_DENIED",
        "ResourceNotFoundException": "NOT_FOUND",
        "ValidationException": "VALIDATION",
        "InvalidInputException": "VALIDATION",
        "ServiceException": "SERVICE",
    }.get(code, code or "STORE_ERROR")
    return StoreError(f"{what}: {code}: {msg}", code=mapped)


def _item_code(http: int | None) -> tuple[str, bool]:
    """Per-item ``errorCode`` (HTTP style) -> (our code, retryable)."""
    if http == 400:
        return "VALIDATION", False
    if http == 402:
        return "QUOTA_EXCEEDED", False
    if http == 404:
        return "NOT_FOUND", False
    if http == 409:
        return "CONFLICT", True
    if http == 429:
        return "THROTTLED", True
    if http is None or http >= 500:
        return "SERVICE", True
    return f"HTTP_{http}", False


@dataclass
class _Outcome:
    ok: bool
    http: int | None = None
    message: str = ""
    memory_record_id: str | None = None


@dataclass
class _Entry:
    key: str  # sidecar key of our record
    body: dict[str, Any]  # the request item


class AgentCoreStore:
    """MemoryStore over one AgentCore memory plus a DynamoDB sidecar table."""

    def __init__(
        self,
        memory_id: str,
        *,
        region: str = "us-east-1",
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
        self.item_retries = item_retries
        self.retry_base_s = retry_base_s
        self._sleep = sleep
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
        self._registered: set[tuple[str, str]] = set()
        # Read path caches (see _fetch): where a record lives, and overflow blobs by hash.
        self._where: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._blobs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        if clients is not None:
            self.client, self.control, ddb = clients
            self.sidecar = Sidecar(ddb, sidecar_table)
            return
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

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> AgentCoreStore:
        parsed = urlparse(url)
        if parsed.scheme != "agentcore" or not parsed.netloc:
            raise ValueError(f"store URL {url!r}: expected agentcore://MEMORY_ID?region=...")
        params = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        known = {
            "region", "endpoint_url", "control_endpoint_url", "sidecar_table",
            "sidecar_endpoint_url", "max_attempts", "strategy_id",
        }  # fmt: skip
        unknown = set(params) - known
        if unknown:
            raise ValueError(f"store URL {url!r}: unknown parameter(s) {sorted(unknown)}")
        opts: dict[str, Any] = dict(params)
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
                raise _store_error(exc, "GetMemory") from None
        return self._memory

    def missing_indexed_keys(self) -> list[str]:
        """Keys of ``INDEXED_KEYS`` the memory does not declare (a deployment check)."""
        declared = {k["key"] for k in self.memory().get("indexedKeys") or []}
        return [k["key"] for k in INDEXED_KEYS if k["key"] not in declared]

    def _templates(self) -> list[tuple[str, str]]:
        out = []
        for s in self.memory().get("strategies") or []:
            for t in s.get("namespaceTemplates") or s.get("namespaces") or []:
                out.append((s["strategyId"], t))
        return out

    @staticmethod
    def _template_re(template: str, actor_id: str | None) -> re.Pattern[str]:
        parts = re.split(r"(\{[a-zA-Z][a-zA-Z0-9]*\})", template)
        rx = ""
        for p in parts:
            if p == "{actorId}":
                rx += re.escape(actor_id) if actor_id is not None else "(?P<actor>[^/]+)"
            elif p.startswith("{"):
                rx += "[^/]+"
            else:
                rx += re.escape(p)
        return re.compile(rx)

    def _actor_owns(self, actor_id: str, namespace: str) -> bool:
        """Whether a strategy template puts ``namespace`` under ``actor_id``."""
        return any(
            "{actorId}" in t and self._template_re(t, actor_id).fullmatch(namespace)
            for _, t in self._templates()
        )

    def _actor_of(self, namespace: str) -> str | None:
        for _, t in self._templates():
            if "{actorId}" in t and (m := self._template_re(t, None).fullmatch(namespace)):
                return m.group("actor")
        return None

    # -- reads -----------------------------------------------------------------------------
    def list_actors(self) -> Iterator[str]:
        """ListActors (actors with events) plus the actors written through this store."""
        actors = set(self.sidecar.actors())
        kwargs: dict[str, Any] = {"memoryId": self.memory_id, "maxResults": MAX_PAGE}
        while True:
            try:
                resp = self.client.list_actors(**kwargs)
            except ClientError as exc:
                raise _store_error(exc, "ListActors") from None
            actors.update(a["actorId"] for a in resp.get("actorSummaries", []))
            if not resp.get("nextToken"):
                break
            kwargs["nextToken"] = resp["nextToken"]
        return iter(sorted(actors))

    def list_namespaces(self, actor_id: str) -> list[str]:
        """Namespaces written for the actor plus the strategies' fully resolved templates.

        A namespace may be listed after its last record was deleted (paging it is cheap).
        """
        found = set(self.sidecar.namespaces(actor_id))
        for _, t in self._templates():
            resolved = t.replace("{actorId}", actor_id)
            if "{actorId}" in t and "{" not in resolved:
                found.add(resolved)
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
        service_token = _decode_token(token, self.memory_id, actor_id, namespace) if token else None
        wanted = {Status(s).value for s in statuses} if statuses else None
        actor_key = safe_value(actor_id)
        native_ok: bool | None = None  # computed on first native record
        kept: list[dict[str, Any]] = []
        calls = 0
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
                raise _store_error(exc, "ListMemoryRecords") from None
            calls += 1
            for s in resp.get("memoryRecordSummaries", []):
                meta = s.get("metadata") or {}
                if "memlife_id" in meta:
                    # cheap pre-filter on metadata before any sidecar read
                    if _meta_value(meta, "actor_id") != actor_key:
                        continue
                    if wanted and _meta_value(meta, "status") not in wanted:
                        continue
                else:
                    if native_ok is None:
                        native_ok = self._actor_owns(actor_id, namespace)
                    if not native_ok or (wanted and Status.active.value not in wanted):
                        continue
                kept.append(s)
            service_token = resp.get("nextToken")
            if not service_token or len(kept) >= page_size or calls >= MAX_LIST_CALLS_PER_PAGE:
                break
        records = self._decode_many(kept, actor_id)
        records = [r for r in records if r.actor_id == actor_id]  # digest collision guard
        nxt = (
            _encode_token(self.memory_id, actor_id, namespace, service_token)
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
        """Every record, actor by actor and namespace by namespace (export), streamed:
        ListMemoryRecords pages of ``batch``; the sidecar is read only for overflow."""
        for actor in self.list_actors():
            for ns in self.list_namespaces(actor):
                token: str | None = None
                while True:
                    page = self.page(actor, ns, page_size=batch, token=token)
                    yield from page.records
                    if page.next_token is None:
                        break
                    token = page.next_token

    # -- decoding --------------------------------------------------------------------------
    def _decode_many(
        self, raws: Sequence[dict[str, Any]], actor_hint: str | None
    ) -> list[MemoryRecord]:
        keys = []
        for r in raws:
            meta = r.get("metadata") or {}
            if "memlife_id" in meta:  # a record of ours, live where AgentCore listed it
                ns = (r.get("namespaces") or [""])[0]
                self._remember(_meta_value(meta, "memlife_id"), r["memoryRecordId"], ns)
                want = _meta_value(meta, OVERFLOW_KEY)
                if want and self._blob(want) is None:
                    keys.append(_meta_value(meta, "memlife_id"))
        items = self.sidecar.get_many(keys) if keys else {}
        for it in items.values():
            self._remember_blobs(it.blobs)
        out = []
        for r in raws:
            meta = r.get("metadata") or {}
            item = items.get(_meta_value(meta, "memlife_id")) if meta else None
            out.append(self._decode(r, item, actor_hint))
        return out

    def _decode(
        self, raw: dict[str, Any], item: SidecarItem | None, actor_hint: str | None
    ) -> MemoryRecord:
        meta = raw.get("metadata") or {}
        mrid = raw["memoryRecordId"]
        ns = (raw.get("namespaces") or [""])[0]
        text = raw["content"]["text"]
        if "memlife_id" not in meta:
            return self._decode_native(raw, actor_hint)
        blob = None
        want = _meta_value(meta, OVERFLOW_KEY)
        if want:
            blob = self._blob(want)
            if blob is None:
                blob = (item.blobs if item else {}).get(want)
            if blob is None:
                raise StoreError(
                    f"AgentCore record {mrid}: its overflow {want[:12]} is not in the sidecar",
                    code="SIDECAR_MISMATCH",
                )
        fields = decode_metadata(meta, blob)
        fields.update(namespace=ns, content=text)
        try:
            return MemoryRecord.model_validate(fields)
        except ValidationError as exc:
            raise StoreError(
                f"AgentCore record {mrid}: metadata does not decode: {exc.errors()[0]['msg']}",
                code="CORRUPT_RECORD",
            ) from None

    def _decode_native(self, raw: dict[str, Any], actor_hint: str | None) -> MemoryRecord:
        """A record AgentCore extracted itself: adopted with lifecycle defaults."""
        ns = (raw.get("namespaces") or [""])[0]
        stype = next(
            (s.get("type") for s in self.memory().get("strategies") or []
             if s.get("strategyId") == raw.get("memoryStrategyId")),
            None,
        )  # fmt: skip
        created = raw["createdAt"]
        return MemoryRecord(
            id=raw["memoryRecordId"],
            actor_id=self._actor_of(ns) or actor_hint or "unknown",
            namespace=ns,
            memory_type=_NATIVE_TYPE.get(stype or "", MemoryType.semantic),
            content=raw["content"]["text"],
            created_at=created if created.tzinfo else created.replace(tzinfo=UTC),
            source=Source.agent_inferred,
        )

    # -- id resolution ---------------------------------------------------------------------
    def _fetch(
        self, ids: Sequence[str], *, for_write: bool = False
    ) -> dict[str, tuple[MemoryRecord, str, SidecarItem | None, datetime | None]]:
        """Our id -> (record, memoryRecordId, sidecar item, native expiresAt), if it exists.

        Reads (``for_write=False``) go straight to GetMemoryRecord when the record's
        location is known (from a listing or an earlier read/write of this store): the
        answer is AgentCore's current record either way, a location is immutable while the
        record lives, and a stale one (deleted, moved, re-created) fails the check and falls
        back to the sidecar. The sidecar item is then ``None``. Writes (``set_status``) read
        the sidecar every time: they need its current version.
        """
        keys = {rid: safe_value(rid) for rid in dict.fromkeys(ids)}
        where = {} if for_write else self._locations(keys)
        items = self.sidecar.get_many([k for rid, k in keys.items() if rid not in where])
        out: dict[str, tuple[MemoryRecord, str, SidecarItem | None, datetime | None]] = {}

        def one(rid: str) -> None:
            key = keys[rid]
            hit = where.get(rid)
            if hit is not None:
                raw = self._get_raw(hit[0], hit[1], quiet=True)
                meta = (raw or {}).get("metadata") or {}
                want = _meta_value(meta, OVERFLOW_KEY)
                if (
                    raw is not None
                    and _meta_value(meta, "memlife_id") == key
                    and (not want or self._blob(want) is not None)
                ):
                    out[rid] = (self._decode(raw, None, None), hit[0], None, raw.get("expiresAt"))
                    return
                self._forget([key])
                item = self.sidecar.get(key)
            else:
                item = items.get(key)
            if item is not None and item.pending:
                item.memory_record_id = self._recover(item)
            if item is not None and item.memory_record_id:
                self._remember_blobs(item.blobs)
                raw = self._get_raw(item.memory_record_id, item.namespace)
                if raw is not None:
                    rec = self._decode(raw, item, item.actor_id)
                    out[rid] = (rec, item.memory_record_id, item, raw.get("expiresAt"))
                    self._remember(key, item.memory_record_id, item.namespace)
            elif item is None and MEMORY_RECORD_ID_RE.fullmatch(rid):
                raw = self._get_raw(rid, None)  # a native record: our id is its id
                if raw is not None and "memlife_id" not in (raw.get("metadata") or {}):
                    out[rid] = (self._decode_native(raw, None), rid, None, None)

        if len(keys) <= 1:
            for rid in keys:
                one(rid)
        else:  # one GetMemoryRecord per record (no batch get exists): a few in flight
            list(self._executor().map(one, keys))
        return out

    def native_ids(self, ids: Sequence[str]) -> dict[str, str]:
        """memlife id -> AgentCore memoryRecordId for records this store has read or written.

        CloudTrail data events name records by memoryRecordId; the pipeline uses this to
        credit those accesses to our ids (see pipeline.iter_views).
        """
        with self._cache_lock:
            return {i: self._where[i][0] for i in ids if i in self._where}

    # -- read caches (locations, overflow blobs) and the worker pool ------------------------
    def _locations(self, keys: dict[str, str]) -> dict[str, tuple[str, str]]:
        with self._cache_lock:
            return {rid: self._where[k] for rid, k in keys.items() if k in self._where}

    def _remember(self, key: str, memory_record_id: str, namespace: str) -> None:
        with self._cache_lock:
            self._where[key] = (memory_record_id, namespace)
            self._where.move_to_end(key)
            while len(self._where) > LOCATION_CACHE:
                self._where.popitem(last=False)

    def _forget(self, keys: Sequence[str]) -> None:
        with self._cache_lock:
            for k in keys:
                self._where.pop(k, None)

    def _blob(self, digest: str) -> dict[str, Any] | None:
        with self._cache_lock:
            return self._blobs.get(digest)

    def _remember_blobs(self, blobs: dict[str, dict[str, Any]]) -> None:
        if not blobs:
            return
        with self._cache_lock:
            for h, blob in blobs.items():
                self._blobs[h] = blob
                self._blobs.move_to_end(h)
            while len(self._blobs) > BLOB_CACHE:
                self._blobs.popitem(last=False)

    def _executor(self) -> ThreadPoolExecutor:
        with self._cache_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(GET_WORKERS, thread_name_prefix="agentcore-get")
            return self._pool

    def _get_raw(
        self, memory_record_id: str, namespace: str | None, *, quiet: bool = False
    ) -> dict[str, Any] | None:
        """GetMemoryRecord; None when absent. ``quiet``: also None when the service refuses
        the lookup itself (a stale cached location: wrong namespace, malformed id)."""
        kwargs: dict[str, Any] = {"memoryId": self.memory_id, "memoryRecordId": memory_record_id}
        if namespace:
            kwargs["namespace"] = namespace
        try:
            return self.client.get_memory_record(**kwargs)["memoryRecord"]
        except ClientError as exc:
            code = _err(exc)[0]
            if code == "ResourceNotFoundException" or (
                quiet and code in ("AccessDeniedException", "ValidationException")
            ):
                return None
            raise _store_error(exc, "GetMemoryRecord") from None

    def _recover(self, item: SidecarItem) -> str | None:
        """A create was interrupted: find the record by its indexed ``memlife_id``."""
        kwargs: dict[str, Any] = {
            "memoryId": self.memory_id,
            "namespace": item.namespace,
            "maxResults": MAX_PAGE,
            "metadataFilters": [
                {
                    "left": {"metadataKey": "memlife_id"},
                    "operator": "EQUALS_TO",
                    "right": {"metadataValue": {"stringValue": item.key}},
                }
            ],
        }
        while True:
            try:
                resp = self.client.list_memory_records(**kwargs)
            except ClientError as exc:
                raise _store_error(exc, "ListMemoryRecords (recovery)") from None
            for s in resp.get("memoryRecordSummaries", []):
                if _meta_value(s.get("metadata") or {}, "memlife_id") == item.key:
                    return str(s["memoryRecordId"])
            if not resp.get("nextToken"):
                return None
            kwargs["nextToken"] = resp["nextToken"]

    # -- writes ----------------------------------------------------------------------------
    def put_many(self, records: Sequence[MemoryRecord]) -> BatchResult:
        """Upsert by id; per-item outcomes. Raises QuotaExceeded (with ``partial``)."""
        result = BatchResult()
        latest = list({r.id: r for r in records}.values())  # last wins, like SQL upserts
        valid: list[MemoryRecord] = []
        for r in latest:
            problem = self._invalid(r)
            if problem:
                result.failed.append(ItemFailure(r.id, "VALIDATION", problem, retryable=False))
            else:
                valid.append(r)
        try:
            for chunk in chunked(valid, MAX_BATCH):
                result.extend(self._write_chunk(chunk, None))
        except QuotaExceeded as exc:
            result.extend(exc.partial)
            exc.partial = result
            raise
        return result

    @staticmethod
    def _invalid(r: MemoryRecord) -> str | None:
        if len(r.content) > MAX_CONTENT:
            return f"content is {len(r.content)} chars; AgentCore takes at most {MAX_CONTENT}"
        if len(r.namespace) > 1024 or not NAMESPACE_RE.fullmatch(r.namespace):
            return "namespace does not match AgentCore's namespace pattern"
        return None

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
        result = BatchResult()
        when = at or utcnow()
        try:
            for chunk in chunked(list(dict.fromkeys(ids)), MAX_BATCH):
                found = self._fetch(chunk, for_write=True)
                result.missing += [rid for rid in chunk if rid not in found]
                changed = []
                for rid in chunk:
                    if rid not in found:
                        continue
                    rec = found[rid][0]
                    prov = rec.provenance.model_copy()
                    if replaced_by is not None or status is not Status.superseded:
                        prov.replaced_by = replaced_by
                    if policy_version is not None:
                        prov.policy_version = policy_version
                    changed.append(
                        rec.model_copy(
                            update={
                                "status": Status(status),
                                "status_changed_at": when,
                                "provenance": prov,
                            }
                        )
                    )
                items = {rid: found[rid][2] for rid in found}
                result.extend(self._write_chunk(changed, items))
        except QuotaExceeded as exc:
            result.extend(exc.partial)
            exc.partial = result
            raise
        return result

    def _write_chunk(
        self,
        records: Sequence[MemoryRecord],
        known: dict[str, SidecarItem | None] | None,
    ) -> BatchResult:
        """Upsert <= 100 records: sidecar first, then AgentCore, then the sidecar's ids."""
        result = BatchResult()
        if not records:
            return result
        by_key = {safe_value(r.id): r for r in records}
        if known is None:
            current = self.sidecar.get_many(by_key)
        else:
            current = {safe_value(rid): it for rid, it in known.items() if it is not None}
        for it in current.values():
            if it.pending:
                it.memory_record_id = self._recover(it)
        for key, r in by_key.items():
            if key not in current and MEMORY_RECORD_ID_RE.fullmatch(r.id):
                raw = self._get_raw(r.id, None)  # a native record: adopt it, never duplicate
                if raw is not None and "memlife_id" not in (raw.get("metadata") or {}):
                    ns = (raw.get("namespaces") or [r.namespace])[0]
                    current[key] = SidecarItem(key, r.id, r.actor_id, ns, 0, r.id)
        # 1. sidecar: new version, overflow blob, still the old memoryRecordId
        writes: list[tuple[SidecarItem, int]] = []
        encoded: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        for key, r in by_key.items():
            meta, blob = encode_metadata(r)
            encoded[key] = (meta, blob)
            old = current.get(key)
            blobs = dict(old.blobs) if old else {}
            if blob:
                h = _blob_hash(blob)
                blobs.pop(h, None)
                blobs[h] = blob
                blobs = dict(list(blobs.items())[-KEEP_BLOBS:])
            new = SidecarItem(
                key=key, record_id=r.id, actor_id=r.actor_id, namespace=r.namespace,
                version=(old.version if old else 0) + 1,
                memory_record_id=old.memory_record_id if old else None, blobs=blobs,
            )  # fmt: skip
            writes.append((new, old.version if old else 0))
        conflicts = self.sidecar.put_many(writes)
        for key, why in conflicts.items():
            result.failed.append(ItemFailure(by_key[key].id, why, "sidecar changed concurrently"))
        staged = {w.key: w for w, _ in writes if w.key not in conflicts}
        # 2. AgentCore: updates for known records, creates for the rest
        updates = [k for k, it in staged.items() if it.memory_record_id]
        creates = [k for k, it in staged.items() if not it.memory_record_id]
        old_ns = {k: (current[k].namespace if k in current else None) for k in staged}
        if updates:
            entries = []
            for k in updates:
                r = by_key[k]
                body: dict[str, Any] = {
                    "memoryRecordId": staged[k].memory_record_id,
                    "timestamp": r.created_at,
                    "content": {"text": r.content},
                    "namespaces": [r.namespace],
                    "metadata": encoded[k][0],
                }
                if old_ns[k] and old_ns[k] != r.namespace:
                    body["sourceNamespaces"] = [old_ns[k]]
                entries.append(_Entry(k, body))
            outcomes = self._batch("update", entries)
            for k in updates:
                o = outcomes[k]
                if o.ok:
                    result.succeeded.append(by_key[k].id)
                    self._remember(k, str(staged[k].memory_record_id), by_key[k].namespace)
                    self._remember_blobs(staged[k].blobs)
                elif o.http == 404:  # deleted behind our back: an upsert re-creates it
                    self._forget([k])
                    staged[k].memory_record_id = None
                    creates.append(k)
                else:
                    code, retry = _item_code(o.http)
                    result.failed.append(ItemFailure(by_key[k].id, code, o.message, retry))
        if creates:
            entries = []
            for k in creates:
                r = by_key[k]
                body = {
                    "requestIdentifier": "r0",  # set per request by _send
                    "namespaces": [r.namespace],
                    "content": {"text": r.content},
                    "timestamp": r.created_at,
                    "metadata": encoded[k][0],
                }
                if self.strategy_id:
                    body["memoryStrategyId"] = self.strategy_id
                entries.append(_Entry(k, body))
            outcomes = self._batch("create", entries)
            done: list[tuple[SidecarItem, int]] = []
            for k in creates:
                o = outcomes[k]
                if o.ok and o.memory_record_id:
                    it = staged[k]
                    done.append(
                        (
                            SidecarItem(
                                key=k,
                                record_id=it.record_id,
                                actor_id=it.actor_id,
                                namespace=it.namespace,
                                version=it.version + 1,
                                memory_record_id=o.memory_record_id,
                                blobs=it.blobs,
                            ),  # fmt: skip
                            it.version,
                        )
                    )
                else:
                    code, retry = _item_code(o.http)
                    result.failed.append(ItemFailure(by_key[k].id, code, o.message, retry))
            lost = self.sidecar.put_many(done)
            for it, _ in done:
                if it.key in lost:  # created, but the id is not recorded: _recover finds it
                    result.failed.append(
                        ItemFailure(it.record_id, "CONFLICT", "sidecar changed during create")
                    )
                else:
                    result.succeeded.append(it.record_id)
                    self._remember(it.key, str(it.memory_record_id), it.namespace)
                    self._remember_blobs(it.blobs)
        self._register({(by_key[k].actor_id, by_key[k].namespace) for k in staged
                        if by_key[k].id in set(result.succeeded)})  # fmt: skip
        return result

    def _register(self, shards: set[tuple[str, str]]) -> None:
        new = shards - self._registered
        if new:
            self.sidecar.register_shards(sorted(new))
            self._registered |= new

    def delete_many(self, ids: Sequence[str]) -> BatchResult:
        result = BatchResult()
        try:
            for chunk in chunked(list(dict.fromkeys(ids)), MAX_BATCH):
                result.extend(self._delete_chunk(chunk))
        except QuotaExceeded as exc:
            result.extend(exc.partial)
            exc.partial = result
            raise
        return result

    def _delete_chunk(self, ids: Sequence[str]) -> BatchResult:
        result = BatchResult()
        keys = {rid: safe_value(rid) for rid in ids}
        items = self.sidecar.get_many(keys.values())
        entries: list[_Entry] = []
        gone: list[str] = []  # sidecar keys to drop
        for rid, key in keys.items():
            item = items.get(key)
            if item is not None and item.pending:
                item.memory_record_id = self._recover(item)
            if item is not None and item.memory_record_id:
                body = {"memoryRecordId": item.memory_record_id, "namespace": item.namespace}
                entries.append(_Entry(key, body))
            elif item is None and MEMORY_RECORD_ID_RE.fullmatch(rid):
                entries.append(_Entry(key, {"memoryRecordId": rid}))  # native record
            else:
                result.missing.append(rid)
                if item is not None:
                    gone.append(key)  # a create that never happened
        by_key = {k: rid for rid, k in keys.items()}
        outcomes = self._batch("delete", entries) if entries else {}
        for e in entries:
            o, rid = outcomes[e.key], by_key[e.key]
            if o.ok:
                result.succeeded.append(rid)
                gone.append(e.key)
            elif o.http == 404:
                result.missing.append(rid)
                gone.append(e.key)
            else:
                code, retry = _item_code(o.http)
                result.failed.append(ItemFailure(rid, code, o.message, retry))
        self._forget(list(keys.values()))
        self.sidecar.delete_many(gone)
        return result

    # -- batch plumbing --------------------------------------------------------------------
    def _batch(self, op: str, entries: list[_Entry]) -> dict[str, _Outcome]:
        """One logical batch (<= 100) with bounded, jittered retry of throttled items."""
        outcomes: dict[str, _Outcome] = {}
        todo = entries
        for attempt in range(self.item_retries + 1):
            got = self._call(op, todo)
            outcomes.update(got)
            todo = [e for e in todo if got[e.key].http == 429]
            if not todo or attempt == self.item_retries:
                break
            delay = self.retry_base_s * (2**attempt)
            self._sleep(random.uniform(delay / 2, delay * 1.5))  # jitter: spread the herd
        return outcomes

    def _call(self, op: str, entries: list[_Entry]) -> dict[str, _Outcome]:
        """One request; whole-request failures become per-item outcomes or StoreError."""
        try:
            resp, rid_to_key = self._send(op, entries)
        except ClientError as exc:
            code, msg = _err(exc)
            if code == "ServiceQuotaExceededException":
                raise QuotaExceeded(f"{op}: AgentCore quota exceeded: {msg}") from None
            bisect = code == "ValidationException" or (
                code == "ResourceNotFoundException" and op == "delete"
            )
            if bisect:  # isolate the record(s) the service objects to
                http = 400 if code == "ValidationException" else 404
                if len(entries) == 1:
                    return {entries[0].key: _Outcome(False, http, msg)}
                mid = len(entries) // 2
                return {**self._call(op, entries[:mid]), **self._call(op, entries[mid:])}
            if code == "ThrottledException":
                return {e.key: _Outcome(False, 429, msg) for e in entries}
            if (
                code == "ServiceException"
                or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500
            ):
                return {e.key: _Outcome(False, 500, msg) for e in entries}
            raise _store_error(exc, op) from None
        except BotoCoreError as exc:  # connection-level, after botocore's retries
            return {e.key: _Outcome(False, 503, str(exc)) for e in entries}
        out: dict[str, _Outcome] = {}
        for ok, lst in (
            (True, resp.get("successfulRecords", [])),
            (False, resp.get("failedRecords", [])),
        ):
            for item in lst:
                ident = (
                    item.get("requestIdentifier") if op == "create" else item.get("memoryRecordId")
                )
                key = rid_to_key.get(ident or "")
                if key is None:
                    continue
                ok_item = ok and item.get("status", "SUCCEEDED") == "SUCCEEDED"
                out[key] = _Outcome(
                    ok_item,
                    None if ok_item else item.get("errorCode"),
                    item.get("errorMessage", ""),
                    item.get("memoryRecordId"),
                )
        for e in entries:  # an item the service did not report is not done
            out.setdefault(e.key, _Outcome(False, 500, "not reported by the service"))
        return out

    def _send(self, op: str, entries: list[_Entry]) -> tuple[dict[str, Any], dict[str, str]]:
        if op == "create":
            bodies, ident = [], {}
            for i, e in enumerate(entries):
                bodies.append({**e.body, "requestIdentifier": f"r{i}"})
                ident[f"r{i}"] = e.key
            # Same records, same content, same lifecycle values -> same token, so a retry of
            # a request whose response was lost creates nothing twice.
            token = hashlib.sha256(
                "\n".join(
                    f"{e.key}|{content_sha256(e.body['content']['text'])}|"
                    f"{json.dumps(e.body['metadata'], sort_keys=True)}"
                    for e in entries
                ).encode()
            ).hexdigest()
            resp = self.client.batch_create_memory_records(
                memoryId=self.memory_id, records=bodies, clientToken=token
            )
            return resp, ident
        ident = {e.body["memoryRecordId"]: e.key for e in entries}
        records = [e.body for e in entries]
        if op == "update":
            return self.client.batch_update_memory_records(
                memoryId=self.memory_id, records=records
            ), ident
        return self.client.batch_delete_memory_records(
            memoryId=self.memory_id, records=records
        ), ident

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
