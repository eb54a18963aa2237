"""Calls to the AgentCore data plane: batches (chunking, item retry, bisection, the quota
stop) and the single-record lookups the read and write paths share.

A logical batch (<= ``MAX_BATCH`` items) goes out as one request; throttled items are
retried with bounded, jittered backoff; a ``ValidationException`` on the whole request is
bisected until the offending record(s) are named; a quota error stops the shard carrying
what was already done (``QuotaExceeded.partial``).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from memlife.model import content_sha256
from memlife.stores.agentcore.errors import (
    QuotaExceeded,
    check_advances,
    error_code,
    item_code,
    kept_message,
    store_error,
)
from memlife.stores.agentcore.mapping import ID_KEY, MAX_PAGE, first_namespace, meta_value
from memlife.stores.base import MAX_BATCH, BatchResult, chunked

Op = Literal["create", "update", "delete"]
T = TypeVar("T")
# our own generator: jitter never moves the global random state a host application seeds
_JITTER = random.Random()


@dataclass
class Outcome:
    """One item's fate in a batch response."""

    ok: bool
    http: int | None = None
    message: str = ""
    memory_record_id: str | None = None
    stopped: bool = False  # not done: a quota stop came first (message: the stop's)
    answered: bool = False  # the service reported this item's failure (``failedRecords``)


@dataclass
class Entry:
    key: str  # sidecar key of our record
    body: dict[str, Any]  # the request item
    nonce: str = ""  # creates: the attempt (the sidecar item's ``create_nonce``)


def stop_of(outcomes: dict[str, Outcome]) -> str | None:
    """The quota stop's message when one cut the batch short, else None."""
    return next((o.message for o in outcomes.values() if o.stopped), None)


def _stopped(entries: Sequence[Entry], message: str) -> dict[str, Outcome]:
    return {e.key: Outcome(False, message=message, stopped=True) for e in entries}


def failure_of(o: Outcome) -> tuple[str, bool]:
    """(our code, retryable) of an item that failed; one a quota stop left undone is
    retried on a later run, like the rest of its stopped shard."""
    return ("QUOTA_EXCEEDED", True) if o.stopped else item_code(o.http)


@contextmanager
def keeping_partial(result: BatchResult) -> Iterator[BatchResult]:
    """A quota stop inside the block leaves carrying ``result`` (what was done before it)
    plus the stop's own partial result, so the caller can journal every item's fate."""
    try:
        yield result
    except QuotaExceeded as exc:
        result.extend(exc.partial)
        exc.partial = result
        raise


def in_chunks(
    items: Sequence[T],
    write: Callable[[list[T]], BatchResult],
    result: BatchResult | None = None,
) -> BatchResult:
    """``write`` each chunk of at most MAX_BATCH items, collecting outcomes into ``result``
    (on a quota stop: see ``keeping_partial``)."""
    with keeping_partial(result if result is not None else BatchResult()) as done:
        for chunk in chunked(items, MAX_BATCH):
            done.extend(write(chunk))
    return done


def create_token(entries: Sequence[Entry], retry: int = 0) -> str:
    """Same create attempts, same content, same lifecycle values -> same token, so a retry
    of a request whose response was lost creates nothing twice. The attempt's nonce keeps
    a later create of the same values (after a delete) from being answered with the
    first create's, long-deleted, record. ``retry``: our resend of items the service
    answered 429 (not created): a new request, since the same token would be answered
    with the first request's 429s again (audit 51ii)."""
    lines = [
        f"{e.key}|{e.nonce}|{content_sha256(e.body['content']['text'])}|"
        f"{json.dumps(e.body['metadata'], sort_keys=True)}"
        for e in entries
    ]
    if retry:
        lines.append(f"retry|{retry}")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _mark_own(request: Any, **_: Any) -> None:
    """Tag a request's user agent as memlife's own (``cloudtrail.OWN_CALL``)."""
    from memlife.cloudtrail import OWN_CALL

    agent = request.headers.get("User-Agent", "")
    agent = agent.decode() if isinstance(agent, bytes) else agent
    if OWN_CALL not in agent:
        request.headers["User-Agent"] = f"{agent} {OWN_CALL}".strip()


class Transport:
    """Sends batch create/update/delete requests of one memory; per-item outcomes."""

    def __init__(
        self,
        client: Any,
        memory_id: str,
        *,
        item_retries: int,
        retry_base_s: float,
        sleep: Callable[[float], None],
    ):
        self.client = client
        # CloudTrail logs memlife's own reads as any client's: marked, the ingest skips them
        # (online recall logs what it returned; a night's reads are no accesses)
        client.meta.events.register("before-sign.bedrock-agentcore", _mark_own,
                                    unique_id="memlife-own-call")  # fmt: skip
        self.memory_id = memory_id
        self.item_retries = item_retries
        self.retry_base_s = retry_base_s
        self._sleep = sleep

    def get(
        self, memory_record_id: str, namespace: str | None, *, quiet: bool = False
    ) -> dict[str, Any] | None:
        """GetMemoryRecord; None when absent. ``quiet``: also None when the service refuses
        the lookup itself (a stale cached location: wrong namespace, malformed id)."""
        kwargs: dict[str, Any] = {"memoryId": self.memory_id, "memoryRecordId": memory_record_id}
        if namespace:
            kwargs["namespace"] = namespace
        try:
            found: dict[str, Any] = self.client.get_memory_record(**kwargs)["memoryRecord"]
            return found
        except ClientError as exc:
            code = error_code(exc)[0]
            if code == "ResourceNotFoundException" or (
                quiet and code in ("AccessDeniedException", "ValidationException")
            ):
                return None
            raise store_error(exc, "GetMemoryRecord") from None

    def find_by_key(self, namespace: str, key: str) -> str | None:
        """The memoryRecordId of our record ``key`` (by its indexed ``memlife_id``), if any."""
        kwargs: dict[str, Any] = {
            "memoryId": self.memory_id,
            "namespace": namespace,
            "maxResults": MAX_PAGE,
            "metadataFilters": [
                {
                    "left": {"metadataKey": ID_KEY},
                    "operator": "EQUALS_TO",
                    "right": {"metadataValue": {"stringValue": key}},
                }
            ],
        }
        while True:
            try:
                resp = self.client.list_memory_records(**kwargs)
            except ClientError as exc:
                raise store_error(exc, "ListMemoryRecords (recovery)") from None
            for s in resp.get("memoryRecordSummaries", []):
                if meta_value(s.get("metadata") or {}, ID_KEY) == key:
                    return str(s["memoryRecordId"])
            if not resp.get("nextToken"):
                return None
            check_advances(
                "ListMemoryRecords (recovery)", kwargs.get("nextToken"), resp["nextToken"]
            )
            kwargs["nextToken"] = resp["nextToken"]

    def namespaces_under(self, path: str) -> set[str]:
        """The namespaces of the records under ``path`` (ListMemoryRecords ``namespacePath``):
        how namespaces with a session (or another open slot) are found; paged to the end."""
        kwargs: dict[str, Any] = {
            "memoryId": self.memory_id, "namespacePath": path, "maxResults": MAX_PAGE,
        }  # fmt: skip
        out: set[str] = set()
        while True:
            try:
                resp = self.client.list_memory_records(**kwargs)
            except ClientError as exc:
                raise store_error(exc, "ListMemoryRecords (namespaces)") from None
            out.update(first_namespace(s) for s in resp.get("memoryRecordSummaries", []))
            if not resp.get("nextToken"):
                return out
            check_advances("ListMemoryRecords (namespaces)", kwargs.get("nextToken"),
                           resp["nextToken"])  # fmt: skip
            kwargs["nextToken"] = resp["nextToken"]

    def batch(self, op: Op, entries: list[Entry]) -> dict[str, Outcome]:
        """One logical batch with bounded, jittered retry of throttled items. A quota stop
        does not lose what the service already did: the items it left undone come back
        ``stopped`` (``stop_of``), the rest with their outcome, and the caller records
        both before it stops the shard."""
        outcomes: dict[str, Outcome] = {}
        todo = entries
        resend = 0  # create_token's ``retry``: how many resends were new requests
        for attempt in range(self.item_retries + 1):
            try:
                got = self._call(op, todo, resend)
            except QuotaExceeded as exc:
                outcomes.update(_stopped(todo, str(exc)))
                break
            outcomes.update(got)
            todo = [e for e in todo if got[e.key].http == 429]
            # a new token only for items the service itself answered 429 (not created); a
            # request refused whole may follow a send of it that was carried out, its answer
            # lost and botocore's resends throttled: only its token replays that (audit 51r)
            if todo and all(got[e.key].answered for e in todo):
                resend += 1
            if not todo or attempt == self.item_retries:
                break
            delay = self.retry_base_s * (2**attempt)
            self._sleep(_JITTER.uniform(delay / 2, delay * 1.5))  # jitter: spread the herd
        return outcomes

    def _call(self, op: Op, entries: list[Entry], retry: int = 0) -> dict[str, Outcome]:
        """One request; whole-request failures become per-item outcomes or StoreError.
        ``retry``: which resend of throttled items this is (0: the first request)."""
        try:
            resp, ident_to_key = self._send(op, entries, retry)
        except ClientError as exc:
            return self._request_failed(op, entries, exc, retry)
        except BotoCoreError as exc:  # connection-level, after botocore's retries
            return {e.key: Outcome(False, 503, str(exc)) for e in entries}
        return self._item_outcomes(op, entries, resp, ident_to_key)

    def _request_failed(
        self, op: Op, entries: list[Entry], exc: ClientError, retry: int = 0
    ) -> dict[str, Outcome]:
        code, msg = error_code(exc)
        if code == "ServiceQuotaExceededException":
            raise QuotaExceeded(f"{op}: AgentCore quota exceeded: {msg}") from None
        bisect = code == "ValidationException" or (
            code == "ResourceNotFoundException" and op == "delete"
        )
        if bisect:  # isolate the record(s) the service objects to
            http = 400 if code == "ValidationException" else 404
            if len(entries) == 1:  # a validation message quotes the record: withheld
                return {entries[0].key: Outcome(False, http, kept_message(code, msg))}
            mid = len(entries) // 2
            first = self._call(op, entries[:mid], retry)
            stop = stop_of(first)  # what the first half did stands, whatever stops the second
            if stop is not None:
                return {**first, **_stopped(entries[mid:], stop)}
            try:
                return {**first, **self._call(op, entries[mid:], retry)}
            except QuotaExceeded as quota:
                return {**first, **_stopped(entries[mid:], str(quota))}
        if code == "ThrottledException":
            return {e.key: Outcome(False, 429, msg) for e in entries}
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code == "ServiceException" or status >= 500:
            return {e.key: Outcome(False, 500, msg) for e in entries}
        raise store_error(exc, op) from None

    @staticmethod
    def _item_outcomes(
        op: Op, entries: list[Entry], resp: dict[str, Any], ident_to_key: dict[str, str]
    ) -> dict[str, Outcome]:
        out: dict[str, Outcome] = {}
        reported = (
            (True, resp.get("successfulRecords", [])),
            (False, resp.get("failedRecords", [])),
        )
        for ok, items in reported:
            for item in items:
                ident = item.get("requestIdentifier" if op == "create" else "memoryRecordId")
                key = ident_to_key.get(ident or "")
                if key is None:
                    continue
                ok_item = ok and item.get("status", "SUCCEEDED") == "SUCCEEDED"
                out[key] = Outcome(
                    ok_item,
                    None if ok_item else item.get("errorCode"),
                    item.get("errorMessage", ""),
                    item.get("memoryRecordId"),
                    answered=not ok_item,
                )
        for e in entries:  # an item the service did not report is not done
            out.setdefault(e.key, Outcome(False, 500, "not reported by the service"))
        return out

    def _send(
        self, op: Op, entries: list[Entry], retry: int = 0
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The request; also how response items name ours (request id or record id)."""
        if op == "create":
            bodies = [{**e.body, "requestIdentifier": f"r{i}"} for i, e in enumerate(entries)]
            ident = {f"r{i}": e.key for i, e in enumerate(entries)}
            token = create_token(entries, retry)
            resp = self.client.batch_create_memory_records(
                memoryId=self.memory_id, records=bodies, clientToken=token
            )
            return resp, ident
        ident = {e.body["memoryRecordId"]: e.key for e in entries}
        records = [e.body for e in entries]
        # explicit calls, not a chosen bound method: tests/contract/test_iam_policy.py scans for them
        if op == "update":
            resp = self.client.batch_update_memory_records(memoryId=self.memory_id, records=records)
        else:
            resp = self.client.batch_delete_memory_records(memoryId=self.memory_id, records=records)
        return resp, ident
