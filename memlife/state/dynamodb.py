"""The DynamoDB state table: one table, string keys ``pk`` / ``sk``, TTL on ``expires_at``.

=========================  ===============  ==================================================
pk                         sk               holds (never memory content, except an
                                            unreceipted operation's payload, as in SQLite)
=========================  ===============  ==================================================
``op#{operation_id}``      ``op``           one journal operation (memlife/journal/dynamodb.py)
``jrun#{run_id}``          operation id     membership: the operations of a run
``jrec#{record_id}``       operation id     membership: operations on / replacing a record
``crej``                   group key        a consolidation group's rejections (backoff, review)
``cout#{memo_key}``        ``cout``         a group's settled outcome (memo; TTL 180 days)
``lease#{store}``          ``lease``        the run lease of a store (state/lease.py)
``qsnap#{record_id}``      ``snap``         quarantine snapshot: status, provenance (ids/hashes)
``perase``                 record id        a pending erasure (deferred by a legal hold)
``tomb#{actor_id}``        ``id#``/``sha#``/``norm#``...  erasure tombstones (ids, hashes)
``emb#{content_sha256}``   model id         a cached embedding vector (float32 bytes)
``rv#{0..7}``, ``rvd#…``   item id          review items, disputed markers (review_queue/dynamodb.py)
``meta``                   ``rvopen``       every open review item is in the ``open`` index
``meta``                   ``runsecret``    a random key made once: manual run ids are keyed by it
``infs#{record_id}``       ``s``            an inferred subject key: a few content words, erased
                                            with the record (inferred/dynamodb.py)
``infk#{sha256}``          record id        the records grouped under one key of one shard
``meta``                   ``store``        the one store this table serves (``check_store``)
=========================  ===============  ==================================================

One table serves one store: record ids, actors and operations are keyed without the store,
so a second store on the same table would run the first one's retry queue, take its review
items and tombstones. The first writer's lease claims the table for its store; any other
store is refused (StateTableInUse) before it reads or writes a thing.

The GSI ``open`` (hash ``open_pk`` = ``open#0``..``open#7``, range ``open_sk`` = created
time + operation id) holds operations until they are receipted: the retry queue of the
next run (``due``) reads it, spread over eight partitions so a big night does not make a
hot key. Review items are in it while open or disputed (``rvopen#0``..``rvopen#7``, the
item id), so listing what waits for a reviewer does not read every item ever resolved. Shaped after the AWS Powertools idempotency persistence layer: every state
change is a conditional write on the state it was read in, and finished records carry a
TTL attribute so the table does not grow without bound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from memlife.state import StateSettings, StateSettingsError
from memlife.unprocessed import responses

T = TypeVar("T")

OPEN_BUCKETS = 8
OPEN_INDEX = "open"
BATCH_GET_MAX = 100
QUERY_WORKERS = 10  # queries at once: botocore's connection pool (max_pool_connections) holds 10
BATCH_WRITE_MAX = 25

Key = dict[str, dict[str, str]]


def key(pk: str, sk: str) -> Key:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def is_conditional_failure(exc: ClientError) -> bool:
    """A write a condition refused. A cancelled transaction is one only when its reasons
    say so: DynamoDB also cancels for ``ThrottlingError`` or ``TransactionConflict``
    (botocore does not retry those), which are the service's, not another writer's."""
    code = exc.response.get("Error", {}).get("Code")
    if code != "TransactionCanceledException":
        return bool(code == "ConditionalCheckFailedException")
    reasons = {r.get("Code") for r in exc.response.get("CancellationReasons") or []}
    return "ConditionalCheckFailed" in reasons and reasons <= {"ConditionalCheckFailed", "None"}


class StateTableInUse(StateSettingsError):
    """The state table serves another store: each store needs a table of its own."""


_STORE = key("meta", "store")


class DynamoState:
    """Clients and table helpers shared by the DynamoDB-backed state parts of one process."""

    def __init__(self, settings: StateSettings, *, session: Any = None) -> None:
        self.settings = settings
        self.table = settings.table
        session = session or boto3.session.Session(region_name=settings.region)
        config = Config(
            retries={"mode": "standard", "max_attempts": 8}, connect_timeout=5, read_timeout=30
        )
        self.ddb = session.client(
            "dynamodb",
            region_name=settings.region,
            endpoint_url=settings.endpoint_url,
            config=config,
        )
        self.s3 = session.client(
            "s3", region_name=settings.region, endpoint_url=settings.s3_endpoint_url, config=config
        )
        self._parts: dict[str, Any] = {}
        self._stores: set[str] = set()  # checked: this table serves them

    def check_store(self, store: str, *, claim: bool = False) -> None:
        """Raise StateTableInUse unless this table serves ``store``; ``claim`` (a writer,
        under its lease) binds a table that serves no store yet. Read-only otherwise: a
        dry run or a reader writes nothing."""
        from memlife.stores import same_store  # light to import

        if store in self._stores:
            return
        item = self.get(_STORE)
        bound = item["store"]["S"] if item else None
        if bound is None and claim:
            try:
                self.ddb.put_item(TableName=self.table, Item={**_STORE, "store": {"S": store}},
                                  ConditionExpression="attribute_not_exists(pk)")  # fmt: skip
                bound = store
            except ClientError as exc:  # another writer claimed it first: read who
                if not is_conditional_failure(exc):
                    raise
                item = self.get(_STORE)
                bound = item["store"]["S"] if item else None
        if bound is not None and not same_store(bound, store):
            raise StateTableInUse(
                f"state table {self.table} serves store {bound}, not {store}: give each store "
                "a state table of its own (MEMLIFE_STATE)"
            )
        if bound is not None:
            self._stores.add(store)

    # -- provisioning (deployer / tests; the runtime role lacks these actions) -------------------
    def create_table(self) -> None:
        """Create the table, its ``open`` index and TTL (deploy/state-table.yaml does the same)."""
        try:
            self.ddb.create_table(
                TableName=self.table,
                BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[
                    {"AttributeName": n, "AttributeType": "S"}
                    for n in ("pk", "sk", "open_pk", "open_sk")
                ],
                KeySchema=[
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                GlobalSecondaryIndexes=[
                    {
                        "IndexName": OPEN_INDEX,
                        "KeySchema": [
                            {"AttributeName": "open_pk", "KeyType": "HASH"},
                            {"AttributeName": "open_sk", "KeyType": "RANGE"},
                        ],
                        "Projection": {"ProjectionType": "ALL"},
                    }
                ],
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceInUseException":
                raise
            return
        self.ddb.get_waiter("table_exists").wait(TableName=self.table)
        self.ddb.update_time_to_live(
            TableName=self.table,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
        )

    def create_bucket(self) -> None:
        try:
            self.s3.create_bucket(Bucket=self.settings.parquet_bucket)
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in (
                "BucketAlreadyOwnedByYou",
                "BucketAlreadyExists",
            ):
                raise

    # -- table helpers ---------------------------------------------------------------------------
    def get(self, k: Key) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.ddb.get_item(
            TableName=self.table, Key=k, ConsistentRead=True
        ).get("Item")
        return item

    def batch_get(self, keys: Sequence[Key]) -> list[dict[str, Any]]:
        """Consistent reads of many items (unprocessed keys retried); order not kept."""
        out: list[dict[str, Any]] = []
        unique = list({(k["pk"]["S"], k["sk"]["S"]): k for k in keys}.values())
        for i in range(0, len(unique), BATCH_GET_MAX):
            request = {self.table: {"Keys": unique[i : i + BATCH_GET_MAX], "ConsistentRead": True}}
            for resp in responses("BatchGetItem", self.ddb.batch_get_item, request,
                                  "UnprocessedKeys"):  # fmt: skip
                out += resp.get("Responses", {}).get(self.table, [])
        return out

    def batch_write(self, puts: Iterable[dict[str, Any]] = (), deletes: Iterable[Key] = ()) -> None:
        """Unconditional puts and deletes (idempotent items only), unprocessed ones retried."""
        reqs = [{"PutRequest": {"Item": p}} for p in puts]
        reqs += [{"DeleteRequest": {"Key": d}} for d in deletes]
        for i in range(0, len(reqs), BATCH_WRITE_MAX):
            request = {self.table: reqs[i : i + BATCH_WRITE_MAX]}
            for _ in responses("BatchWriteItem", self.ddb.batch_write_item, request,
                               "UnprocessedItems"):  # fmt: skip
                pass

    def query(self, pk: str, *, index: str | None = None, **kw: Any) -> Iterator[dict[str, Any]]:
        """Every item of a partition (base table: consistent; the index: eventually)."""
        name = "open_pk" if index else "pk"
        args: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#h = :h",
            "ExpressionAttributeNames": {"#h": name},
            "ExpressionAttributeValues": {":h": {"S": pk}},
        }
        if index:
            args["IndexName"] = index
        else:
            args["ConsistentRead"] = True
        for k, v in kw.items():
            if k in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
                args[k] = {**args[k], **v}
            else:
                args[k] = v
        for page in self.ddb.get_paginator("query").paginate(**args):
            yield from page.get("Items", [])

    # -- the parts, one per process and table ------------------------------------------------------
    def part(self, name: str, make: Callable[[DynamoState], T]) -> T:
        """The journal / side tables / ... bound to this table, made once per process. The
        caller names the class: this module imports none of them (no import circle)."""
        if name not in self._parts:
            self._parts[name] = make(self)
        made: T = self._parts[name]  # made by ``make`` under this name: a T
        return made
