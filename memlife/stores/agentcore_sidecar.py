"""DynamoDB sidecar of the AgentCore store: what AgentCore metadata cannot hold.

One table, string hash key ``pk`` and string range key ``sk``. Three kinds of item:

======================  ========  ===========================================================
pk                      sk        holds
======================  ========  ===========================================================
``rec#{key}``           ``rec``   ``record_id`` (ours) -> ``memory_record_id`` (absent while
                                  a create is in flight: ``state = pending``), ``actor_id``,
                                  ``namespace``, ``version`` (N), ``blobs`` (the fields that
                                  did not fit AgentCore metadata, by content hash),
                                  ``create_nonce`` (while pending: names the create
                                  attempt in its ``clientToken``), ``updated_at``
``actors``              actor id  the actor registry (actors written through this store)
``ns#{actor id}``       namespace the namespaces written for that actor
======================  ========  ===========================================================

Record items are keyed by *our* record id (``MemoryRecord.id``) in its metadata-safe form
(the id itself, or ``sha256:<hex>`` of it when it does not fit AgentCore metadata; the same
value AgentCore holds as metadata ``memlife_id``), so both directions resolve in one read:
our id -> key -> item -> ``memoryRecordId``, and a listed record's ``memlife_id`` -> item.
Writes to record items are conditional on ``version`` (optimistic concurrency): a writer
that read version ``n`` writes ``n + 1`` only if the item is still at ``n`` (still absent
for ``n = 0``); losing that race is a per-item ``CONFLICT``, never a silent overwrite.
The version guards the sidecar, not AgentCore: while a writer's BatchUpdate is on its way
its item says ``writing`` (when it was staged), and no other writer stages over it until
that is answered or older than ``writes.WRITING_STALE_S`` (a writer that died): AgentCore
applies updates as they arrive, so the one staged first could land last.

Memory *content* never goes here: the sidecar holds ids, lifecycle fields and provenance.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from memlife.errors import is_throttling
from memlife.stores.base import StoreError
from memlife.unprocessed import responses

T = TypeVar("T")
PUT_WORKERS = 8
BATCH_GET_MAX = 100
BATCH_WRITE_MAX = 25
REC_SK = "rec"
ITEM_MAX = 400 * 1024  # DynamoDB's item size limit (attribute names and values, UTF-8)
# what a record item's overflow blobs may take: the rest (key, ids and actor of at most 256
# characters, a namespace of at most 1,024 ASCII, times, nonce) is a few KB (audit 52ii)
BLOBS_MAX = ITEM_MAX - 16 * 1024


def blobs_text(blobs: dict[str, dict[str, Any]]) -> str:
    """The ``blobs`` attribute as stored: ASCII JSON (escaped), so its length is its bytes."""
    return json.dumps(list(blobs.items()), separators=(",", ":"))


def fitting_blobs(blobs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The newest blobs (oldest first, as kept) that fit one item; the newest always stays
    (one too large alone is refused before any write: mapping.invalid_reason). Kept blobs
    of 150 KB made the third version's item too large, and the record could never be
    written again (audit 52ii)."""
    kept = dict(blobs)
    while len(kept) > 1 and len(blobs_text(kept)) > BLOBS_MAX:
        kept.pop(next(iter(kept)))
    return kept


@dataclass
class SidecarItem:
    key: str  # the record's metadata-safe key (``memlife_id`` in AgentCore metadata)
    record_id: str
    actor_id: str
    namespace: str
    version: int = 0  # 0: not stored yet
    memory_record_id: str | None = None  # None: create in flight (pending)
    # overflow blobs by content hash, newest last (a few kept: see AgentCoreStore)
    blobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    # While pending: the create attempt this item stands for. Part of the BatchCreate
    # clientToken, so a retry of the same attempt (botocore's, or ours after a crash) is
    # deduplicated by the service while a new attempt (the record was deleted and is
    # written again) is not answered with the first attempt's record.
    create_nonce: str | None = None
    # While an update of this version is on its way to AgentCore: when it was staged (ISO).
    # Another writer does not stage over it (its BatchUpdate could land first and be
    # overwritten by this one's) unless it is older than WRITING_STALE_S (a dead writer).
    writing: str | None = None

    @property
    def pending(self) -> bool:
        return self.memory_record_id is None


def _rec_key(key: str) -> dict[str, Any]:
    return {"pk": {"S": f"rec#{key}"}, "sk": {"S": REC_SK}}


def _to_ddb(item: SidecarItem) -> dict[str, Any]:
    out: dict[str, Any] = {
        **_rec_key(item.key),
        "record_id": {"S": item.record_id},
        "actor_id": {"S": item.actor_id},
        "namespace": {"S": item.namespace},
        "version": {"N": str(item.version)},
        "state": {"S": "pending" if item.pending else "live"},
        "blobs": {"S": blobs_text(item.blobs)},
        "updated_at": {"S": datetime.now(UTC).isoformat()},
    }
    if item.memory_record_id is not None:
        out["memory_record_id"] = {"S": item.memory_record_id}
    elif item.create_nonce is not None:
        out["create_nonce"] = {"S": item.create_nonce}
    if item.writing is not None:
        out["writing"] = {"S": item.writing}
    return out


def _from_ddb(raw: dict[str, Any]) -> SidecarItem:
    return SidecarItem(
        key=raw["pk"]["S"][len("rec#") :],
        record_id=raw["record_id"]["S"],
        actor_id=raw["actor_id"]["S"],
        namespace=raw["namespace"]["S"],
        version=int(raw["version"]["N"]),
        memory_record_id=raw["memory_record_id"]["S"] if "memory_record_id" in raw else None,
        blobs=dict(json.loads(raw["blobs"]["S"])) if "blobs" in raw else {},
        create_nonce=raw["create_nonce"]["S"] if "create_nonce" in raw else None,
        writing=raw["writing"]["S"] if "writing" in raw else None,
    )


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _store_errors(method: Callable[..., T]) -> Callable[..., T]:
    """A sidecar failure (missing table, throttling past retries, denied) stops the shard
    like any store failure: StoreError with a code, never a raw boto error mid-run."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return method(*args, **kwargs)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "ClientError")
            raise StoreError(f"sidecar table: {code}", code=f"SIDECAR_{code}") from exc
        except BotoCoreError as exc:
            raise StoreError(
                f"sidecar table: {type(exc).__name__}", code="SIDECAR_UNAVAILABLE"
            ) from exc

    return wrapper


class Sidecar:
    """The sidecar table behind a boto3 DynamoDB *client* (thread-safe, like the client)."""

    def __init__(self, client: Any, table: str):
        self.client = client
        self.table = table

    # -- table ---------------------------------------------------------------------------
    def create_table(self) -> None:
        """Create the table (on-demand billing) if absent; for setup scripts and tests."""
        try:
            self.client.create_table(
                TableName=self.table,
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                KeySchema=[
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceInUseException":
                raise
        self.client.get_waiter("table_exists").wait(
            TableName=self.table, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )

    # -- record items --------------------------------------------------------------------
    @_store_errors
    def get_many(self, keys: Iterable[str]) -> dict[str, SidecarItem]:
        """Items by key (absent keys are absent from the answer)."""
        ids = list(dict.fromkeys(keys))
        out: dict[str, SidecarItem] = {}
        for chunk in _chunks(ids, BATCH_GET_MAX):
            request: dict[str, Any] = {
                self.table: {"Keys": [_rec_key(i) for i in chunk], "ConsistentRead": True}
            }
            for resp in responses("BatchGetItem", self.client.batch_get_item, request,
                                  "UnprocessedKeys"):  # fmt: skip
                for raw in resp.get("Responses", {}).get(self.table, []):
                    item = _from_ddb(raw)
                    out[item.key] = item
        return out

    @_store_errors
    def get(self, key: str) -> SidecarItem | None:
        return self.get_many([key]).get(key)

    @_store_errors
    def put_many(self, items: Sequence[tuple[SidecarItem, int]]) -> dict[str, str]:
        """Write each ``(item, expected_version)``; ``item.version`` must be the new one.

        Returns ``{key: reason}`` for items not written (``CONFLICT`` or an error code);
        every other item was written. Throttling raises (StoreError, once every put of the
        call was tried): a put it refused is undecided, not a lost race. One conditional
        PutItem per item, a few in parallel: per-item conditions are what we need (a
        transaction would fail all for one conflict, costs double, and moto copies the
        whole table per transaction).
        """
        failed: dict[str, str] = {}
        if len(items) <= 1:
            for item, expected in items:
                self._put_one(item, expected, failed)
            return failed
        with ThreadPoolExecutor(max_workers=min(PUT_WORKERS, len(items))) as pool:
            list(pool.map(lambda pair: self._put_one(pair[0], pair[1], failed), items))
        return failed

    def _put_one(self, item: SidecarItem, expected: int, failed: dict[str, str]) -> None:
        kwargs: dict[str, Any] = {"TableName": self.table, "Item": _to_ddb(item)}
        if expected == 0:
            kwargs["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            kwargs["ConditionExpression"] = "version = :v"
            kwargs["ExpressionAttributeValues"] = {":v": {"N": str(expected)}}
        try:
            self.client.put_item(**kwargs)
        except ClientError as exc:
            # throttled past botocore's attempts: the item may yet be at ``expected``, so it is
            # no lost race; recorded as one, step 3 of a create deleted the record it had just
            # created and the retry's clientToken replayed its id (audit 52ii2). The shard's
            # THROTTLED path (put_many raises) retries it; a pending item recovers the record.
            if is_throttling(exc):
                raise
            code = exc.response["Error"]["Code"]
            failed[item.key] = "CONFLICT" if code == "ConditionalCheckFailedException" else code

    @_store_errors
    def delete_many(self, keys: Iterable[str], versions: dict[str, int] | None = None) -> None:
        """Called once AgentCore confirmed the record gone. A key in ``versions`` goes only
        while its item is still at the version read: a writer that re-created the record
        meanwhile keeps its item (its record stays reachable by id)."""
        versions = versions or {}
        for key in dict.fromkeys(k for k in keys if k in versions):
            try:
                self.client.delete_item(
                    TableName=self.table, Key=_rec_key(key),
                    ConditionExpression="attribute_not_exists(pk) OR version = :v",
                    ExpressionAttributeValues={":v": {"N": str(versions[key])}},
                )  # fmt: skip
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
        ids = list(dict.fromkeys(k for k in keys if k not in versions))
        for chunk in _chunks(ids, BATCH_WRITE_MAX):
            request: dict[str, Any] = {
                self.table: [{"DeleteRequest": {"Key": _rec_key(i)}} for i in chunk]
            }
            for _ in responses("BatchWriteItem", self.client.batch_write_item, request,
                               "UnprocessedItems"):  # fmt: skip
                pass

    # -- shard registry ------------------------------------------------------------------
    @_store_errors
    def register_shards(self, shards: Iterable[tuple[str, str]]) -> None:
        """Record (actor, namespace) pairs; idempotent plain puts."""
        puts: dict[tuple[str, str], dict[str, Any]] = {}
        for actor, ns in shards:
            puts[("actors", actor)] = {"pk": {"S": "actors"}, "sk": {"S": actor}}
            puts[(f"ns#{actor}", ns)] = {"pk": {"S": f"ns#{actor}"}, "sk": {"S": ns}}
        reqs = [{"PutRequest": {"Item": it}} for it in puts.values()]
        for chunk in _chunks(reqs, BATCH_WRITE_MAX):
            request: dict[str, Any] = {self.table: list(chunk)}
            for _ in responses("BatchWriteItem", self.client.batch_write_item, request,
                               "UnprocessedItems"):  # fmt: skip
                pass

    def _query_sks(self, pk: str) -> list[str]:
        out: list[str] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": pk}},
            "ProjectionExpression": "sk",
        }
        while True:
            resp = self.client.query(**kwargs)
            out += [it["sk"]["S"] for it in resp.get("Items", [])]
            if "LastEvaluatedKey" not in resp:
                return out
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]

    @_store_errors
    def actors(self) -> list[str]:
        return self._query_sks("actors")

    @_store_errors
    def namespaces(self, actor_id: str) -> list[str]:
        return self._query_sks(f"ns#{actor_id}")
