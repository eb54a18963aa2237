"""Review items in the DynamoDB state table (``MEMLIFE_STATE=dynamodb://…``).

=======================================  ==========  =========================================
pk                                       sk          holds (ids, codes, numbers; no content)
=======================================  ==========  =========================================
``rv#{0..7}`` (from the item id)         item id     the review item
``rvd#{actor_id}\\x1f{namespace}``        item id     a disputed item (what each shard reads)
``meta``                                 ``rvopen``  the open-items index holds every open item
=======================================  ==========  =========================================

Items are spread over eight partitions so a night's writes do not make a hot key. Every
write is conditional: an insert never overwrites an item, a night is counted once per run
id, and a resolved item is never changed again. The disputed marker changes in the same
transaction as its item.

An open or disputed item also carries ``open_pk`` = ``rvopen#{0..7}`` / ``open_sk`` = item
id, the keys of the table's sparse ``open`` index, and a waiting one ``rvwait#{0..7}``;
resolving removes them. Listing the open
items (every night, and `review list`) reads that index, so it costs what is open, not every
item ever resolved. Items opened before the index was kept are given its keys by the next
night that writes the queue (``_backfill``), which then sets ``meta``/``rvopen``; until then
the listing reads the item partitions, as it did before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from memlife.review_queue.base import (
    COLUMNS,
    OPEN_STATES,
    RENEWED,
    WAITING,
    Carried,
    Renewal,
    ReviewItem,
)
from memlife.state.dynamodb import OPEN_INDEX, DynamoState, is_conditional_failure, key

BUCKETS = 8
# the states the sparse ``open`` index holds: what a night and `review list` read
INDEXED_STATES = (*OPEN_STATES, WAITING)
_NUMBERS = {"priority": float, "nights": int}
# set once every open item carries the open index's keys (items of before the index backfilled)
INDEXED = key("meta", "rvopen")


def _bucket(iid: str) -> int:
    return int(hashlib.sha256(iid.encode()).hexdigest()[:8], 16) % BUCKETS


def item_key(iid: str) -> dict[str, dict[str, str]]:
    return key(f"rv#{_bucket(iid)}", iid)


def open_keys(iid: str, state: str = "open") -> dict[str, dict[str, str]]:
    """The item's entry in the sparse ``open`` index (only while open, disputed or waiting):
    waiting items under partitions of their own, so reading what is open reads none of them."""
    part = "rvwait" if state == WAITING else "rvopen"
    return {"open_pk": {"S": f"{part}#{_bucket(iid)}"}, "open_sk": {"S": iid}}


def _marker(item: ReviewItem) -> dict[str, dict[str, str]]:
    return key(f"rvd#{item.actor_id}\x1f{item.namespace}", item.item_id)


def to_item(item: ReviewItem) -> dict[str, Any]:
    out: dict[str, Any] = item_key(item.item_id)
    if item.state in INDEXED_STATES:
        out.update(open_keys(item.item_id, item.state))
    for col in COLUMNS:
        value = getattr(item, col)
        if value is not None:
            out[col] = {"N": repr(value)} if col in _NUMBERS else {"S": value}
    return out


def from_item(raw: dict[str, Any]) -> ReviewItem:
    values: dict[str, Any] = {}
    for col in COLUMNS:
        cell = raw.get(col)
        if cell is None:
            values[col] = None
        elif col in _NUMBERS:
            values[col] = _NUMBERS[col](cell["N"])
        else:
            values[col] = cell["S"]
    return ReviewItem(**values)


class DynamoReviews:
    def __init__(self, state: DynamoState) -> None:
        self.state = state
        self._indexed = False  # seen INDEXED (it is never removed)
        # ids this process wrote open (a night's carried, opened, renewed, backfilled items):
        # the index may not show them yet, so the listing reads them beside it
        self._written: set[str] = set()

    def get_many(self, ids: Sequence[str]) -> dict[str, ReviewItem]:
        items = self.state.batch_get([item_key(i) for i in ids])
        return {i.item_id: i for i in map(from_item, items)}

    def list(self, states: Iterable[str]) -> list[ReviewItem]:
        states = tuple(states)
        if set(states) <= set(INDEXED_STATES) and self.is_indexed():
            # the index is eventually consistent: its ids are re-read before a state is trusted
            parts = [p for p, wanted in (("rvopen", set(states) & set(OPEN_STATES)),
                                         ("rvwait", WAITING in states)) if wanted]  # fmt: skip
            ids = [raw["sk"]["S"] for p in parts for b in range(BUCKETS) for raw in
                   self.state.query(f"{p}#{b}", index=OPEN_INDEX, ProjectionExpression="pk, sk")]  # fmt: skip
            found = self.get_many(list(dict.fromkeys([*ids, *sorted(self._written)])))
            return [i for i in found.values() if i.state in states]
        return [from_item(raw) for raw in self._scan(states)]

    def is_indexed(self) -> bool:
        if not self._indexed:
            self._indexed = self.state.get(INDEXED) is not None
        return self._indexed

    def _scan(self, states: Iterable[str]) -> Iterable[dict[str, Any]]:
        """Every item in these states, read from the item partitions (resolved ones too)."""
        wanted = {f":s{n}": {"S": s} for n, s in enumerate(states)}
        for bucket in range(BUCKETS):
            yield from self.state.query(
                f"rv#{bucket}", FilterExpression=f"#s IN ({', '.join(wanted)})",
                ExpressionAttributeNames={"#s": "state"}, ExpressionAttributeValues=wanted,
            )  # fmt: skip

    def _backfill(self) -> None:
        """Give the open items of before the index its keys, once; a writer's step (the night
        that writes the queue, under the store's lease). An item resolved meanwhile is left."""
        if self.is_indexed():
            return
        for raw in self._scan(OPEN_STATES):
            if "open_pk" in raw:
                continue
            iid = raw["sk"]["S"]
            self._written.add(iid)
            keys = open_keys(iid)
            try:
                self.state.ddb.update_item(
                    TableName=self.state.table, Key=item_key(iid),
                    UpdateExpression="SET open_pk = :pk, open_sk = :sk",
                    ConditionExpression="attribute_exists(pk) AND #s <> :resolved",
                    ExpressionAttributeNames={"#s": "state"},
                    ExpressionAttributeValues={":pk": keys["open_pk"], ":sk": keys["open_sk"],
                                               ":resolved": {"S": "resolved"}},
                )  # fmt: skip
            except ClientError as exc:  # resolved by a reviewer in between: not open
                if not is_conditional_failure(exc):
                    raise
        self.state.ddb.put_item(TableName=self.state.table, Item=INDEXED)
        self._indexed = True

    def disputed(self, actor_id: str, namespace: str) -> frozenset[str]:
        rows = self.state.query(f"rvd#{actor_id}\x1f{namespace}")
        return frozenset(r["record_id"]["S"] for r in rows)

    def write_night(self, carried: Sequence[Carried], opened: Sequence[ReviewItem], run_id: str,
                    at: str, renewed: Sequence[Renewal] = (),
                    moved: Sequence[ReviewItem] = (), dropped: Sequence[str] = ()) -> None:  # fmt: skip
        ddb, table = self.state.ddb, self.state.table
        self._backfill()
        self._written.update([i for i, _ in carried] + [i.item_id for i in opened]
                             + [i.item_id for _, i in renewed]
                             + [i.item_id for i in moved])  # fmt: skip
        for iid, sha in carried:
            values = {":one": {"N": "1"}, ":r": {"S": run_id}, ":t": {"S": at},
                      ":resolved": {"S": "resolved"}}  # fmt: skip
            update = "SET nights = nights + :one, last_seen_run = :r, last_seen_at = :t"
            if sha is not None:  # recorded where the item had none (opened before hashes)
                update += ", content_sha256 = if_not_exists(content_sha256, :h)"
                values[":h"] = {"S": sha}
            try:
                ddb.update_item(
                    TableName=table, Key=item_key(iid), UpdateExpression=update,
                    ConditionExpression="attribute_exists(pk) AND last_seen_run <> :r "
                                        "AND #s <> :resolved",
                    ExpressionAttributeNames={"#s": "state"}, ExpressionAttributeValues=values,
                )  # fmt: skip
            except ClientError as exc:  # already counted for this run, or resolved meanwhile
                if not is_conditional_failure(exc):
                    raise
        # the items that waited and open tonight before the new waiting ones (review of
        # session 32: a crash between, then a reviewer's answer, opened nothing on the rerun)
        for item in moved:  # the whole item (opened or renewed once: a rerun)
            self._while_waiting(ddb.put_item, Item=to_item(item))
        for item in opened:
            try:
                ddb.put_item(TableName=table, Item=to_item(item),
                             ConditionExpression="attribute_not_exists(pk)")  # fmt: skip
            except ClientError as exc:  # opened already (a rerun of the same night)
                if not is_conditional_failure(exc):
                    raise
        for old, item in renewed:
            raw = to_item(item)
            # names as placeholders: some (owner) are reserved words in DynamoDB
            names = {"#s": "state", **{f"#{c}": c for c in RENEWED}}
            sets = [f"#{c} = :{c}" for c in RENEWED if c in raw]
            removes = [f"#{c}" for c in RENEWED if c not in raw]
            values = {f":{c}": raw[c] for c in RENEWED if c in raw}
            values.update({":old": {"S": old}, ":resolved": {"S": "resolved"}})
            update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
            try:
                ddb.update_item(
                    TableName=table, Key=item_key(item.item_id), UpdateExpression=update,
                    ConditionExpression="attribute_exists(pk) AND #s <> :resolved "
                                        "AND #content_sha256 = :old",
                    ExpressionAttributeNames=names, ExpressionAttributeValues=values,
                )  # fmt: skip
            except ClientError as exc:  # renewed already (a rerun), or resolved meanwhile
                if not is_conditional_failure(exc):
                    raise
        for iid in dropped:
            self._while_waiting(ddb.delete_item, Key=item_key(iid))

    def _while_waiting(self, call: Callable[..., Any], **kw: Any) -> None:
        """``call`` (a put or a delete of one item) only while the item waits; else nothing:
        a rerun did it, or a reviewer answered meanwhile (that answer stays)."""
        try:
            call(TableName=self.state.table, ConditionExpression="#s = :waiting",
                 ExpressionAttributeNames={"#s": "state"},
                 ExpressionAttributeValues={":waiting": {"S": WAITING}}, **kw)  # fmt: skip
        except ClientError as exc:
            if not is_conditional_failure(exc):
                raise

    def close(self, iid: str, *, state: str, decision: str, reviewer: str,
              resolved_at: str | None, operation_id: str | None) -> bool:  # fmt: skip
        found = self.get_many([iid]).get(iid)
        if found is None or found.state == "resolved":
            return False
        values = {":st": {"S": state}, ":d": {"S": decision}, ":rv": {"S": reviewer},
                  ":resolved": {"S": "resolved"}}  # fmt: skip
        sets, removes = ["#s = :st", "decision = :d", "reviewer = :rv"], []
        owner_name = {"#owner": "owner"} if decision == "erased" else {}
        if owner_name:  # an erased record's owner goes with it
            removes.append("#owner")
        if state not in OPEN_STATES:  # out of the open index
            removes += ["open_pk", "open_sk"]
        else:  # a waiting item disputed: from the waiting partitions to the open ones
            sets += ["open_pk = :opk", "open_sk = :osk"]
            keys = open_keys(iid, state)
            values.update({":opk": keys["open_pk"], ":osk": keys["open_sk"]})
        for col, value in (("resolved_at", resolved_at), ("operation_id", operation_id)):
            if value is None:
                removes.append(col)
            else:
                sets.append(f"{col} = :{col}")
                values[f":{col}"] = {"S": value}
        update = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        marker = _marker(found)
        mark = (
            {"Put": {"TableName": self.state.table,
                     "Item": {**marker, "record_id": {"S": found.record_id}}}}
            if state == "disputed"
            else {"Delete": {"TableName": self.state.table, "Key": marker}}
        )  # fmt: skip
        try:
            self.state.ddb.transact_write_items(TransactItems=[
                {"Update": {"TableName": self.state.table, "Key": item_key(iid),
                            "UpdateExpression": update,
                            "ConditionExpression": "attribute_exists(pk) AND #s <> :resolved",
                            "ExpressionAttributeNames": {"#s": "state", **owner_name},
                            "ExpressionAttributeValues": values}},
                mark,
            ])  # fmt: skip
        except ClientError as exc:  # resolved by someone else in between
            if not is_conditional_failure(exc):
                raise
            return False
        return True
