"""Review items in the DynamoDB state table (``MEMLIFE_STATE=dynamodb://…``).

=======================================  ==========  =========================================
pk                                       sk          holds (ids, codes, numbers; no content)
=======================================  ==========  =========================================
``rv#{0..7}`` (from the item id)         item id     the review item
``rvd#{actor_id}\\x1f{namespace}``        item id     a disputed item (what each shard reads)
=======================================  ==========  =========================================

Items are spread over eight partitions so a night's writes do not make a hot key; `review
list` reads the eight. Every write is conditional: an insert never overwrites an item, a
night is counted once per run id, and a resolved item is never changed again. The disputed
marker changes in the same transaction as its item.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from memlife.review_queue.base import COLUMNS, RENEWED, Carried, Renewal, ReviewItem
from memlife.state.dynamodb import DynamoState, is_conditional_failure, key

BUCKETS = 8
_NUMBERS = {"priority": float, "nights": int}


def item_key(iid: str) -> dict[str, dict[str, str]]:
    bucket = int(hashlib.sha256(iid.encode()).hexdigest()[:8], 16) % BUCKETS
    return key(f"rv#{bucket}", iid)


def _marker(item: ReviewItem) -> dict[str, dict[str, str]]:
    return key(f"rvd#{item.actor_id}\x1f{item.namespace}", item.item_id)


def to_item(item: ReviewItem) -> dict[str, Any]:
    out: dict[str, Any] = item_key(item.item_id)
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

    def get_many(self, ids: Sequence[str]) -> dict[str, ReviewItem]:
        items = self.state.batch_get([item_key(i) for i in ids])
        return {i.item_id: i for i in map(from_item, items)}

    def list(self, states: Iterable[str]) -> list[ReviewItem]:
        wanted = {f":s{n}": {"S": s} for n, s in enumerate(states)}
        out: list[ReviewItem] = []
        for bucket in range(BUCKETS):
            for raw in self.state.query(
                f"rv#{bucket}", FilterExpression=f"#s IN ({', '.join(wanted)})",
                ExpressionAttributeNames={"#s": "state"}, ExpressionAttributeValues=wanted,
            ):  # fmt: skip
                out.append(from_item(raw))
        return out

    def disputed(self, actor_id: str, namespace: str) -> frozenset[str]:
        rows = self.state.query(f"rvd#{actor_id}\x1f{namespace}")
        return frozenset(r["record_id"]["S"] for r in rows)

    def write_night(self, carried: Sequence[Carried], opened: Sequence[ReviewItem], run_id: str,
                    at: str, renewed: Sequence[Renewal] = ()) -> None:  # fmt: skip
        ddb, table = self.state.ddb, self.state.table
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

    def close(self, iid: str, *, state: str, decision: str, reviewer: str,
              resolved_at: str | None, operation_id: str | None) -> bool:  # fmt: skip
        found = self.get_many([iid]).get(iid)
        if found is None or found.state == "resolved":
            return False
        values = {":st": {"S": state}, ":d": {"S": decision}, ":rv": {"S": reviewer},
                  ":resolved": {"S": "resolved"}}  # fmt: skip
        sets, removes = ["#s = :st", "decision = :d", "reviewer = :rv"], []
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
                            "ExpressionAttributeNames": {"#s": "state"},
                            "ExpressionAttributeValues": values}},
                mark,
            ])  # fmt: skip
        except ClientError as exc:  # resolved by someone else in between
            if not is_conditional_failure(exc):
                raise
            return False
        return True
