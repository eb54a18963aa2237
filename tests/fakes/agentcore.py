"""A fake AgentCore Memory behind the REAL boto3 client (REST-JSON over HTTP on 127.0.0.1).

boto3 is pointed at it with ``endpoint_url``, so every request is built, serialised and
parameter-validated by botocore from the installed service model, and every answer is
parsed by it (errors included: ``x-amzn-ErrorType`` + JSON body, like the service).

Operations: data plane ``ListActors``, ``ListMemoryRecords``, ``GetMemoryRecord``,
``BatchCreateMemoryRecords``, ``BatchUpdateMemoryRecords``, ``BatchDeleteMemoryRecords``;
control plane ``GetMemory`` (same server: the two planes' paths do not collide).

What it assumes of the real service (where the model is silent, the strict reading):

* Limits from the model are enforced server-side, as botocore checks only types, required
  members and minimums: ``maxResults`` 1..100 (default 20), batches <= 100 items, content
  1..16,000 chars, exactly one namespace per record (the model allows 0..1) matching the
  namespace pattern, metadata <= 20 keys, key/value patterns, string values <= 256 chars,
  string lists <= 5 x 64, one member per union. Any violation fails the WHOLE request
  with ``ValidationException`` (the adapter bisects to name the record).
* ``ListMemoryRecords`` needs ``namespace`` (exact) or ``namespacePath`` (prefix); pages
  are keyset-ordered by ``memoryRecordId`` and ``nextToken`` is an opaque cursor bound to
  the query, so a record present throughout a listing is returned exactly once even if
  others are created or deleted between pages. ``nextToken`` is absent on the last page.
  ``metadataFilters`` work only on the memory's ``indexedKeys`` (else ValidationException);
  ``EQUALS_TO``, ``EXISTS`` and ``NOT_EXISTS`` are implemented, other operators are refused
  (the fake does not guess their semantics).
* ``memoryRecordId`` is assigned by the service (``mem-`` + uuid, 40 chars); clients cannot
  choose it. ``requestIdentifier`` is echoed per item; ``clientToken`` makes a create
  request idempotent (same token + same body -> the first answer again, no new records;
  same token + other body -> ValidationException ``IdempotentParameterMismatchException``).
* Per-item outcomes carry HTTP-style ``errorCode``s: 404 for an unknown record on update or
  delete (a partial failure, not an exception), 403 when the given namespace is not the
  record's, plus whatever the test scripts (e.g. 500, 429).
* ``BatchUpdateMemoryRecords`` replaces what it is given (content, namespaces, metadata map
  as a whole); ``timestamp`` is required. ``GetMemoryRecord`` alone returns ``expiresAt``,
  set from ``recordExpirySpecification`` (days) at create time.
* ``ListActors`` lists actors that have events (short-term memory), not actors inferred
  from records; tests add them with ``add_actor``.
* Records created without ``memoryStrategyId`` get the strategy id ``direct``.

Scripting (each consumes itself): ``throttle_next(n, op)`` -> whole-request 429
``ThrottledException``; ``quota_next(n, op)`` -> 402 ``ServiceQuotaExceededException``;
``fail_next_items(op, ids, code, times)`` / ``fail_next_deletes`` / ``fail_next_creates`` /
``fail_next_updates`` -> per-item failures for records named by ``memoryRecordId`` or by
their ``memlife_id`` metadata; ``validation_error_next(n, op)``; ``missing_deletes =
"request"`` -> a BatchDelete naming an unknown record fails as a whole with
ResourceNotFoundException. ``requests`` logs ``(operation, params)``. ``bulk_load`` seeds
a memory directly (what ``put_many`` would leave behind) for large tests.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

MAX_RESULTS = 100
DEFAULT_RESULTS = 20
MAX_BATCH = 100
MAX_CONTENT = 16_000
NAMESPACE_RE = re.compile(
    r"[a-zA-Z0-9/*][a-zA-Z0-9\-_/*]*(?::[a-zA-Z0-9\-_/*]+)*[a-zA-Z0-9\-_/*]*", re.ASCII
)
META_KEY_RE = re.compile(r"[a-zA-Z0-9\s._:/=+@-]*", re.ASCII)
META_VALUE_RE = META_KEY_RE
REQUEST_ID_RE = re.compile(r"[a-zA-Z0-9_-]+", re.ASCII)
RECORD_ID_RE = re.compile(r"mem-[a-zA-Z0-9\-_]*", re.ASCII)
DEFAULT_MEMORY_ID = "memlife_test-a1b2c3d4e5"

_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("POST", re.compile(r"^/memories/([^/]+)/actors$"), "ListActors"),
    ("POST", re.compile(r"^/memories/([^/]+)/memoryRecords$"), "ListMemoryRecords"),
    ("GET", re.compile(r"^/memories/([^/]+)/memoryRecord/([^/]+)$"), "GetMemoryRecord"),
    ("POST", re.compile(r"^/memories/([^/]+)/memoryRecords/batchCreate$"), "BatchCreate"),
    ("POST", re.compile(r"^/memories/([^/]+)/memoryRecords/batchUpdate$"), "BatchUpdate"),
    ("POST", re.compile(r"^/memories/([^/]+)/memoryRecords/batchDelete$"), "BatchDelete"),
    ("GET", re.compile(r"^/memories/([^/]+)/details$"), "GetMemory"),
]
_OP_ALIASES = {"create": "BatchCreate", "update": "BatchUpdate", "delete": "BatchDelete"}


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, **extra: Any):
        super().__init__(message)
        self.status, self.code, self.message, self.extra = status, code, message, extra


def _validation(message: str, reason: str = "FieldValidationFailed") -> ApiError:
    return ApiError(400, "ValidationException", message, reason=reason)


@dataclass
class _Script:
    op: str | None
    remaining: int
    skip: int = 0  # matching requests let through first


@dataclass
class _ItemFail:
    op: str
    ids: set[str]
    code: int
    message: str
    remaining: dict[str, int] = field(default_factory=dict)


def _canon(op: str | None) -> str | None:
    return _OP_ALIASES.get(op, op) if op else None


class FakeAgentCore:
    """One AgentCore memory served over HTTP. Thread-safe; start() / stop() or ``with``."""

    def __init__(
        self,
        memory_id: str = DEFAULT_MEMORY_ID,
        *,
        strategies: list[dict[str, Any]] | None = None,
        indexed_keys: Iterable[dict[str, str]] | None = None,
    ):
        self.memory_id = memory_id
        self.strategies = strategies or []
        self.indexed_keys = list(indexed_keys or [])
        self.records: dict[str, dict[str, Any]] = {}
        self.actors: set[str] = set()
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.RLock()
        self._throttle: list[_Script] = []
        self._quota: list[_Script] = []
        self._invalid: list[_Script] = []
        self._item_fails: list[_ItemFail] = []
        self._rejected: set[str] = set()
        self._idempotency: dict[str, tuple[str, dict[str, Any]]] = {}
        # How a BatchDelete naming an unknown record answers: "item" (a per-item 404, the
        # default) or "request" (the whole request fails with ResourceNotFoundException,
        # the stricter reading; the adapter bisects down to the record).
        self.missing_deletes = "item"
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def reset(
        self,
        *,
        strategies: list[dict[str, Any]] | None = None,
        indexed_keys: Iterable[dict[str, str]] | None = None,
    ) -> None:
        """Back to an empty memory (records, actors, scripts, log), keeping the server."""
        with self.lock:
            self.strategies = strategies or []
            if indexed_keys is not None:
                self.indexed_keys = list(indexed_keys)
            self.records.clear()
            self.actors.clear()
            self.requests.clear()
            self._idempotency.clear()
            self.missing_deletes = "item"
        self.clear_scripts()

    def clear_scripts(self) -> None:
        """Drop every scripted failure not yet served (throttles, quotas, item failures)."""
        with self.lock:
            self._throttle.clear()
            self._quota.clear()
            self._invalid.clear()
            self._item_fails.clear()
            self._rejected.clear()

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeAgentCore:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms stalls

            def do_GET(self) -> None:
                fake._serve(self, "GET")

            def do_POST(self) -> None:
                fake._serve(self, "POST")

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeAgentCore:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def endpoint_url(self) -> str:
        assert self._server is not None, "start() the fake first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- scripting -------------------------------------------------------------------------
    def throttle_next(self, n: int = 1, op: str | None = None) -> None:
        with self.lock:
            self._throttle.append(_Script(_canon(op), n))

    def quota_next(self, n: int = 1, op: str | None = None, *, skip: int = 0) -> None:
        with self.lock:
            self._quota.append(_Script(_canon(op), n, skip))

    def validation_error_next(self, n: int = 1, op: str | None = None) -> None:
        with self.lock:
            self._invalid.append(_Script(_canon(op), n))

    def fail_next_items(
        self, op: str, ids: Iterable[str], code: int = 500, *, times: int = 1, message: str = ""
    ) -> None:
        """The next ``times`` attempts on each of ``ids`` in ``op`` fail with ``code``."""
        idset = set(ids)
        with self.lock:
            self._item_fails.append(
                _ItemFail(
                    _canon(op) or op,
                    idset,
                    code,
                    message or f"scripted failure {code}",
                    {i: times for i in idset},
                )
            )

    def reject_records(self, ids: Iterable[str]) -> None:
        """Any create/update batch holding one of these (by ``memlife_id`` or record id)
        fails as a whole with ValidationException, as if the service refused its values."""
        with self.lock:
            self._rejected |= set(ids)

    def fail_next_deletes(self, ids: Iterable[str], code: int = 500, *, times: int = 1) -> None:
        self.fail_next_items("delete", ids, code, times=times)

    def fail_next_creates(self, ids: Iterable[str], code: int = 500, *, times: int = 1) -> None:
        self.fail_next_items("create", ids, code, times=times)

    def fail_next_updates(self, ids: Iterable[str], code: int = 500, *, times: int = 1) -> None:
        self.fail_next_items("update", ids, code, times=times)

    def add_actor(self, actor_id: str) -> None:
        """An actor with events (what ListActors reports)."""
        with self.lock:
            self.actors.add(actor_id)

    def add_native_record(
        self, namespace: str, text: str, strategy_id: str = "direct", **metadata: str
    ) -> str:
        """A record as AgentCore's own extraction would write it (no memlife metadata)."""
        now = time.time()
        rec = {
            "memoryRecordId": f"mem-{uuid.uuid4()}",
            "content": {"text": text},
            "memoryStrategyId": strategy_id,
            "namespaces": [namespace],
            "createdAt": now,
            "timestamp": now,
        }
        if metadata:
            rec["metadata"] = {k: {"stringValue": v} for k, v in metadata.items()}
        with self.lock:
            self.records[rec["memoryRecordId"]] = rec
        return str(rec["memoryRecordId"])

    # -- inspection ------------------------------------------------------------------------
    def ops(self, op: str) -> list[dict[str, Any]]:
        op = _canon(op) or op
        with self.lock:
            return [p for o, p in self.requests if o == op]

    def record_by_memlife_id(self, memlife_id: str) -> dict[str, Any] | None:
        with self.lock:
            for r in self.records.values():
                if _mval(r, "memlife_id") == memlife_id:
                    return r
        return None

    # -- HTTP ------------------------------------------------------------------------------
    def _serve(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urlparse(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        status, payload, headers = 200, {}, {}
        try:
            op, groups = self._route(method, url.path)
            body = json.loads(raw) if raw else {}
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            with self.lock:
                self.requests.append((op, {**body, **query}))
                self._scripted_errors(op)
                if unquote(groups[0]) != self.memory_id:
                    raise ApiError(404, "ResourceNotFoundException", "memory not found")
                status, payload = getattr(self, f"_op_{op}")(body, query, groups)
        except ApiError as e:
            status, payload = e.status, {"message": e.message, **e.extra}
            headers["x-amzn-ErrorType"] = e.code
        except Exception as e:  # a bug in the fake must surface, not hang the client
            status, payload = 500, {"message": f"fake error: {e!r}"}
            headers["x-amzn-ErrorType"] = "ServiceException"
        out = json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(out)))
        h.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(out)

    def _route(self, method: str, path: str) -> tuple[str, tuple[str, ...]]:
        for m, rx, op in _ROUTES:
            if m == method and (match := rx.match(path)):
                return op, match.groups()
        raise ApiError(404, "UnknownOperationException", f"{method} {path}")

    def _scripted_errors(self, op: str) -> None:
        for scripts, status, code in (
            (self._quota, 402, "ServiceQuotaExceededException"),
            (self._throttle, 429, "ThrottledException"),
            (self._invalid, 400, "ValidationException"),
        ):
            for s in scripts:
                if s.remaining > 0 and s.op in (None, op):
                    if s.skip > 0:
                        s.skip -= 1
                        continue
                    s.remaining -= 1
                    extra = {"reason": "FieldValidationFailed"} if status == 400 else {}
                    raise ApiError(status, code, f"scripted {code}", **extra)

    def _item_failure(self, op: str, rec_ids: Iterable[str | None]) -> tuple[int, str] | None:
        for f in self._item_fails:
            if f.op != op:
                continue
            for rid in rec_ids:
                if rid in f.ids and f.remaining.get(rid, 0) > 0:
                    f.remaining[rid] -= 1
                    return f.code, f.message
        return None

    # -- validation ------------------------------------------------------------------------
    def _check_namespaces(self, namespaces: Any, where: str) -> str:
        if not isinstance(namespaces, list) or len(namespaces) != 1:
            raise _validation(f"{where}: exactly one namespace per record")
        ns = namespaces[0]
        if not (1 <= len(ns) <= 1024) or not NAMESPACE_RE.fullmatch(ns):
            raise _validation(f"{where}: namespace does not match the pattern")
        return str(ns)

    @staticmethod
    def _check_content(content: Any, where: str) -> None:
        text = (content or {}).get("text")
        if not isinstance(text, str) or not (1 <= len(text) <= MAX_CONTENT):
            raise _validation(f"{where}: content.text must be 1..{MAX_CONTENT} chars")

    @staticmethod
    def _check_metadata(meta: Any, where: str) -> None:
        if not isinstance(meta, dict) or not (1 <= len(meta) <= 20):
            raise _validation(f"{where}: metadata must have 1..20 keys")
        for k, v in meta.items():
            if not (1 <= len(k) <= 128) or not META_KEY_RE.fullmatch(k):
                raise _validation(f"{where}: metadata key {k!r} not allowed")
            if not isinstance(v, dict) or len(v) != 1:
                raise _validation(f"{where}: metadata {k!r} must set exactly one value member")
            ((kind, val),) = v.items()
            if kind == "stringValue":
                if not (1 <= len(val) <= 256) or not META_VALUE_RE.fullmatch(val):
                    raise _validation(f"{where}: metadata {k!r} value not allowed")
            elif kind == "stringListValue":
                if not (1 <= len(val) <= 5) or any(
                    not (1 <= len(x) <= 64) or not META_VALUE_RE.fullmatch(x) for x in val
                ):
                    raise _validation(f"{where}: metadata {k!r} list not allowed")
            elif kind not in ("numberValue", "dateTimeValue"):
                raise _validation(f"{where}: metadata {k!r}: unknown member {kind}")

    def _check_batch(self, records: Any) -> list[dict[str, Any]]:
        if not isinstance(records, list) or len(records) > MAX_BATCH:
            raise _validation(f"records: at most {MAX_BATCH} per batch")
        for r in records:
            names = {r.get("memoryRecordId"), _mval(r, "memlife_id")}
            if names & self._rejected:
                raise _validation(f"record {sorted(n for n in names if n)} refused")
        return records

    # -- operations ------------------------------------------------------------------------
    def _op_GetMemory(self, body: dict, query: dict, groups: tuple) -> tuple[int, dict]:
        now = time.time()
        return 200, {
            "memory": {
                "arn": f"arn:aws:bedrock-agentcore:us-east-1:123456789012:memory/{self.memory_id}",
                "id": self.memory_id,
                "name": self.memory_id.rsplit("-", 1)[0],
                "eventExpiryDuration": 90,
                "status": "ACTIVE",
                "createdAt": now,
                "updatedAt": now,
                "strategies": self.strategies,
                **({"indexedKeys": self.indexed_keys} if self.indexed_keys else {}),
            }
        }

    def _op_ListActors(self, body: dict, query: dict, groups: tuple) -> tuple[int, dict]:
        n = self._max_results(body)
        actors = sorted(self.actors)
        after = self._cursor(body.get("nextToken"), "actors")
        rest = [a for a in actors if after is None or a > after]
        page = rest[:n]
        out: dict[str, Any] = {"actorSummaries": [{"actorId": a} for a in page]}
        if len(rest) > n:
            out["nextToken"] = self._token(page[-1], "actors")
        return 200, out

    def _op_ListMemoryRecords(self, body: dict, query: dict, groups: tuple) -> tuple[int, dict]:
        ns, path = body.get("namespace"), body.get("namespacePath")
        if not ns and not path:
            raise _validation("either namespace or namespacePath is required")
        n = self._max_results(body)
        filters = body.get("metadataFilters") or []
        if len(filters) > 5:
            raise _validation("metadataFilters: at most 5")
        indexed = {k["key"] for k in self.indexed_keys}
        for f in filters:
            key = f["left"].get("metadataKey")
            if key not in indexed:
                raise _validation(f"metadataFilters: {key!r} is not an indexed key")
            if f["operator"] not in ("EQUALS_TO", "EXISTS", "NOT_EXISTS"):
                raise _validation(f"fake: operator {f['operator']} not implemented")
        scope = json.dumps([ns, path, filters], sort_keys=True)
        after = self._cursor(body.get("nextToken"), scope)

        def match(r: dict[str, Any]) -> bool:
            rns = r["namespaces"][0] if r["namespaces"] else ""
            if ns and rns != ns:
                return False
            if path and not rns.startswith(path):
                return False
            for f in filters:
                v = (r.get("metadata") or {}).get(f["left"]["metadataKey"])
                if f["operator"] == "EXISTS" and v is None:
                    return False
                if f["operator"] == "NOT_EXISTS" and v is not None:
                    return False
                if f["operator"] == "EQUALS_TO" and v != f["right"]["metadataValue"]:
                    return False
            return True

        rest = sorted(
            (r for r in self.records.values() if match(r)), key=lambda r: r["memoryRecordId"]
        )
        if after is not None:
            rest = [r for r in rest if r["memoryRecordId"] > after]
        page = rest[:n]
        out: dict[str, Any] = {
            "memoryRecordSummaries": [
                {k: v for k, v in r.items() if k != "expiresAt"} for r in page
            ]
        }
        if len(rest) > n:
            out["nextToken"] = self._token(page[-1]["memoryRecordId"], scope)
        return 200, out

    def _op_GetMemoryRecord(self, body: dict, query: dict, groups: tuple) -> tuple[int, dict]:
        rid = unquote(groups[1])
        if not RECORD_ID_RE.fullmatch(rid) or not (40 <= len(rid) <= 50):
            raise _validation("memoryRecordId does not match the pattern")
        rec = self.records.get(rid)
        if rec is None:
            raise ApiError(404, "ResourceNotFoundException", f"memory record {rid} not found")
        if query.get("namespace") and query["namespace"] != rec["namespaces"][0]:
            raise ApiError(403, "AccessDeniedException", "namespace is not the record's")
        return 200, {"memoryRecord": rec}

    def _op_BatchCreate(self, body: dict, query: dict, groups: tuple) -> tuple[int, dict]:
        records = self._check_batch(body.get("records"))
        token = body.get("clientToken")
        fingerprint = hashlib.sha256(json.dumps(records, sort_keys=True).encode()).hexdigest()
        if token and token in self._idempotency:
            seen, answer = self._idempotency[token]
            if seen != fingerprint:
                raise _validation(
                    "clientToken reused with another request",
                    "IdempotentParameterMismatchException",
                )
            return 201, answer
        idents: set[str] = set()
        for i, r in enumerate(records):
            where = f"records[{i}]"
            ident = r.get("requestIdentifier", "")
            if not REQUEST_ID_RE.fullmatch(ident) or len(ident) > 80 or ident in idents:
                raise _validation(f"{where}: requestIdentifier invalid or repeated")
            idents.add(ident)
            self._check_namespaces(r.get("namespaces"), where)
            self._check_content(r.get("content"), where)
            if "metadata" in r:
                self._check_metadata(r["metadata"], where)
        days = (body.get("recordExpirySpecification") or {}).get("recordExpiryDurationDays")
        ok, failed = [], []
        now = time.time()
        for r in records:
            ident = r["requestIdentifier"]
            meta = r.get("metadata") or {}
            mlid = (meta.get("memlife_id") or {}).get("stringValue")
            fail = self._item_failure("BatchCreate", [mlid])
            if fail:
                failed.append(self._item_out(f"mem-{'0' * 36}", "FAILED", ident, *fail))
                continue
            rid = f"mem-{uuid.uuid4()}"
            rec: dict[str, Any] = {
                "memoryRecordId": rid,
                "content": {"text": r["content"]["text"]},
                "memoryStrategyId": r.get("memoryStrategyId") or "direct",
                "namespaces": list(r["namespaces"]),
                "createdAt": now,
                "timestamp": r["timestamp"],
            }
            if meta:
                rec["metadata"] = meta
            if days:
                rec["expiresAt"] = now + 86400 * days
            self.records[rid] = rec
            ok.append(self._item_out(rid, "SUCCEEDED", ident))
        answer = {"successfulRecords": ok, "failedRecords": failed}
        if token:
            self._idempotency[token] = (fingerprint, answer)
        return 201, answer

    def _op_BatchUpdate(self, body: dict, query: dict, groups: tuple) -> tuple[int, dict]:
        records = self._check_batch(body.get("records"))
        for i, r in enumerate(records):
            where = f"records[{i}]"
            if "namespaces" in r:
                self._check_namespaces(r["namespaces"], where)
            if "content" in r:
                self._check_content(r["content"], where)
            if "metadata" in r:
                self._check_metadata(r["metadata"], where)
        ok, failed = [], []
        for r in records:
            rid = r["memoryRecordId"]
            rec = self.records.get(rid)
            fail = self._item_failure("BatchUpdate", [rid, _mval(rec, "memlife_id")])
            if fail:
                failed.append(self._item_out(rid, "FAILED", None, *fail))
                continue
            if rec is None:
                failed.append(self._item_out(rid, "FAILED", None, 404, "memory record not found"))
                continue
            src = r.get("sourceNamespaces")
            if src and src != rec["namespaces"]:
                failed.append(self._item_out(rid, "FAILED", None, 403, "sourceNamespaces mismatch"))
                continue
            rec["timestamp"] = r["timestamp"]
            for k in ("content", "namespaces", "metadata"):
                if k in r:
                    rec[k] = r[k]
            ok.append(self._item_out(rid, "SUCCEEDED", None))
        return 200, {"successfulRecords": ok, "failedRecords": failed}

    def _op_BatchDelete(self, body: dict, query: dict, groups: tuple) -> tuple[int, dict]:
        records = self._check_batch(body.get("records"))
        if self.missing_deletes == "request":
            unknown = [
                r["memoryRecordId"] for r in records if r["memoryRecordId"] not in self.records
            ]
            if unknown:
                raise ApiError(
                    404, "ResourceNotFoundException", f"memory record {unknown[0]} not found"
                )
        ok, failed = [], []
        for r in records:
            rid = r["memoryRecordId"]
            rec = self.records.get(rid)
            fail = self._item_failure("BatchDelete", [rid, _mval(rec, "memlife_id")])
            if fail:
                failed.append(self._item_out(rid, "FAILED", None, *fail))
                continue
            if rec is None:
                failed.append(self._item_out(rid, "FAILED", None, 404, "memory record not found"))
                continue
            if r.get("namespace") and r["namespace"] != rec["namespaces"][0]:
                failed.append(self._item_out(rid, "FAILED", None, 403, "namespace mismatch"))
                continue
            del self.records[rid]
            ok.append(self._item_out(rid, "SUCCEEDED", None))
        return 200, {"successfulRecords": ok, "failedRecords": failed}

    # -- helpers ---------------------------------------------------------------------------
    @staticmethod
    def _item_out(
        rid: str, status: str, ident: str | None, code: int | None = None, msg: str | None = None
    ) -> dict[str, Any]:
        out: dict[str, Any] = {"memoryRecordId": rid, "status": status}
        if ident is not None:
            out["requestIdentifier"] = ident
        if code is not None:
            out["errorCode"] = code
            out["errorMessage"] = msg or ""
        return out

    @staticmethod
    def _max_results(body: dict) -> int:
        n = body.get("maxResults", DEFAULT_RESULTS)
        if not (1 <= n <= MAX_RESULTS):
            raise _validation(f"maxResults must be 1..{MAX_RESULTS}")
        return int(n)

    @staticmethod
    def _token(last: str, scope: str) -> str:
        raw = json.dumps([last, hashlib.sha256(scope.encode()).hexdigest()[:16]])
        return base64.urlsafe_b64encode(raw.encode()).decode()

    @staticmethod
    def _cursor(token: str | None, scope: str) -> str | None:
        if not token:
            return None
        try:
            last, sc = json.loads(base64.urlsafe_b64decode(token.encode()))
        except Exception:
            raise _validation("nextToken is invalid") from None
        if sc != hashlib.sha256(scope.encode()).hexdigest()[:16]:
            raise _validation("nextToken belongs to another query")
        return str(last)


def _mval(rec: dict[str, Any] | None, key: str) -> str | None:
    if not rec:
        return None
    v = (rec.get("metadata") or {}).get(key) or {}
    return v.get("stringValue")


def bulk_load(store: Any, fake: FakeAgentCore, records: Iterable[Any]) -> int:
    """Seed a fresh memory with what ``store.put_many(records)`` would leave behind, fast.

    Test seeding only: the fake's records and the sidecar items (version 2, live, overflow
    blob keyed by its hash, shards registered) are written directly, unconditionally, in
    DynamoDB batches of 25. Per record, ``put_many`` costs three conditional/sequential
    calls (sidecar, BatchCreate, sidecar), about 30 ms under moto; this costs ~0.5 ms.
    The encoding is the store's own (``encode_metadata``), so what the store reads back
    is what it would have written; tests that care compare against a reference store.
    Records the store would refuse (``_invalid``) raise: seeds must be valid.
    """
    from memlife.stores.agentcore import _blob_hash, encode_metadata, safe_value
    from memlife.stores.agentcore_sidecar import BATCH_WRITE_MAX, SidecarItem, _to_ddb

    items: list[dict[str, Any]] = []
    shards: set[tuple[str, str]] = set()
    now = time.time()
    with fake.lock:
        for r in records:
            problem = store._invalid(r)
            if problem:
                raise ValueError(f"bulk_load: {r.id}: {problem}")
            meta, blob = encode_metadata(r)
            rid = f"mem-{uuid.uuid4()}"
            fake.records[rid] = {
                "memoryRecordId": rid,
                "content": {"text": r.content},
                "memoryStrategyId": store.strategy_id or "direct",
                "namespaces": [r.namespace],
                "createdAt": now,
                "timestamp": r.created_at.timestamp(),
                "metadata": meta,
            }
            key = safe_value(r.id)
            blobs = {_blob_hash(blob): blob} if blob else {}
            item = SidecarItem(key, r.id, r.actor_id, r.namespace, 2, rid, blobs)
            items.append({"PutRequest": {"Item": _to_ddb(item)}})
            shards.add((r.actor_id, r.namespace))
    ddb, table = store.sidecar.client, store.sidecar.table
    for i in range(0, len(items), BATCH_WRITE_MAX):
        request: dict[str, Any] = {table: items[i : i + BATCH_WRITE_MAX]}
        while request:
            request = ddb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
    store.sidecar.register_shards(sorted(shards))
    return len(items)


class AgentCoreHarness:
    """moto (``mock_aws``) + a started fake + shared boto3 clients; ``store()`` hands out a
    fresh ``AgentCoreStore`` over an emptied fake and a re-created sidecar table.

    Use one harness per module/session (client creation under moto is the slow part) and
    call ``store()`` per test; ``close()`` at the end.
    """

    def __init__(self, sidecar_table: str = "memlife-sidecar", max_attempts: int = 3):
        import boto3
        from botocore.config import Config
        from moto import mock_aws

        from memlife.stores.agentcore import INDEXED_KEYS

        self.sidecar_table = sidecar_table
        self._mock = mock_aws()
        self._mock.start()
        self.fake = FakeAgentCore(indexed_keys=INDEXED_KEYS).start()
        session = boto3.session.Session(region_name="us-east-1")
        config = Config(retries={"mode": "standard", "max_attempts": max_attempts})
        url = self.fake.endpoint_url
        self.clients = (
            session.client("bedrock-agentcore", endpoint_url=url, config=config),
            session.client("bedrock-agentcore-control", endpoint_url=url, config=config),
            session.client("dynamodb", config=config),
        )

    def store(self, *, strategies: list[dict[str, Any]] | None = None, **kwargs: Any) -> Any:
        from memlife.stores.agentcore import INDEXED_KEYS, AgentCoreStore

        self.fake.reset(strategies=strategies, indexed_keys=INDEXED_KEYS)
        ddb = self.clients[2]
        if self.sidecar_table in ddb.list_tables()["TableNames"]:
            ddb.delete_table(TableName=self.sidecar_table)
        store = AgentCoreStore(
            self.fake.memory_id,
            region="us-east-1",
            endpoint_url=self.fake.endpoint_url,
            sidecar_table=self.sidecar_table,
            clients=self.clients,
            **{"retry_base_s": 0.001, **kwargs},
        )
        store.sidecar.create_table()
        return store

    def close(self) -> None:
        self.fake.stop()
        for c in self.clients:
            c.close()
        self._mock.stop()


@contextmanager
def agentcore_store(
    *, strategies: list[dict[str, Any]] | None = None, **store_kwargs: Any
) -> Iterator[tuple[Any, FakeAgentCore]]:
    """One ``AgentCoreStore`` against a fresh fake + moto DynamoDB sidecar: ``(store, fake)``.

    moto's ``mock_aws`` is active inside the block (it lets requests to 127.0.0.1 through
    to the fake). Item retries back off in milliseconds.
    """
    harness = AgentCoreHarness()
    try:
        yield harness.store(strategies=strategies, **store_kwargs), harness.fake
    finally:
        harness.close()
