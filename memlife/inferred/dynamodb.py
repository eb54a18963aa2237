"""Inferred subjects in the DynamoDB state table: ``infs#{record_id}`` / ``s``, and each
key's members under ``infk#{digest}`` / record id.

A key holds a few content words (for the reviewer), so erasure deletes it with the record
(:meth:`DynamoSubjects.forget`, called by the erase applier). Inserts are conditional
(``attribute_not_exists``): a key, once given, never moves, even when ``remember`` on one
machine and the nightly run on another infer the same record at once. A key is its shard's:
an item another actor's or namespace's record left under a reused id is neither returned
nor kept (the insert's condition lets a new shard take it over).

Items are keyed by record id, so the records grouped under one key are found through a
member list per (shard, key): ``infk#{sha256 of actor, namespace and key}``, one item per
record id. A key and its entry are written in one transaction and deleted in one, so no
stored key is missing from its list, whatever runs between (an erasure racing a
``remember``). A key stored before member lists existed gets its entry the next time
``put`` meets its record (items so listed carry ``m``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import partial
from typing import Any

from botocore.exceptions import ClientError

from memlife.model import utcnow
from memlife.state.dynamodb import DynamoState, Key, is_conditional_failure, key

Shard = tuple[str, str]
_ATTEMPTS = 5  # a transaction another one on the same items cancels is tried again
_PAIRS = 50  # records to one transaction: two actions each, DynamoDB takes 100


def _rid(pair: list[dict[str, Any]]) -> str:
    """The record id of a pair whose first action is on its key item (``infs#{id}``)."""
    return str(pair[0]["Delete"]["Key"]["pk"]["S"][5:])


def _key(record_id: str) -> Key:
    return key(f"infs#{record_id}", "s")


def _members(shard: Shard, subject: str) -> str:
    """The partition listing one key's records in one shard (the words stay out of keys)."""
    raw = "\x1f".join((*shard, subject)).encode("utf-8", "surrogatepass")
    return f"infk#{hashlib.sha256(raw).hexdigest()}"


def _member(shard: Shard, subject: str, record_id: str) -> Key:
    return key(_members(shard, subject), record_id)


def _shard(item: dict[str, Any]) -> Shard:
    return item["actor_id"]["S"], item["namespace"]["S"]


def _holds(shard: Shard, subject: str) -> dict[str, Any]:
    """Condition arguments: the item holds ``subject`` in ``shard``."""
    return {
        "ConditionExpression": "#s = :s AND #a = :a AND #n = :n",
        "ExpressionAttributeNames": {"#s": "subject", "#a": "actor_id", "#n": "namespace"},
        "ExpressionAttributeValues": {":s": {"S": subject}, ":a": {"S": shard[0]},
                                      ":n": {"S": shard[1]}},
    }  # fmt: skip


class DynamoSubjects:
    def __init__(self, state: DynamoState) -> None:
        self.state = state

    def _items(self, shard: Shard, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        items = self.state.batch_get([_key(i) for i in ids])
        return {i["pk"]["S"][5:]: i for i in items if _shard(i) == shard}

    def get(self, shard: Shard, ids: Sequence[str]) -> dict[str, str]:
        return {rid: i["subject"]["S"] for rid, i in self._items(shard, ids).items()}

    def put(self, actor_id: str, namespace: str, subjects: Mapping[str, str], how: str) -> None:
        shard = (actor_id, namespace)
        # the common case on later nights: all known and listed, no write
        known = self._items(shard, list(subjects))
        for rid, item in known.items():
            if "m" not in item:  # stored before member lists: listed now
                self._list_known(shard, rid, item["subject"]["S"])
        now = utcnow().isoformat()
        writes: list[list[dict[str, Any]]] = []
        for rid, subject in subjects.items():
            if rid in known:
                continue
            item = {**_key(rid), "actor_id": {"S": actor_id}, "namespace": {"S": namespace},
                    "subject": {"S": subject}, "how": {"S": how}, "assigned_at": {"S": now},
                    "m": {"N": "1"}}  # fmt: skip
            insert = {
                "TableName": self.state.table, "Item": item,
                "ConditionExpression": "attribute_not_exists(pk) OR #a <> :a OR #n <> :n",
                "ExpressionAttributeNames": {"#a": "actor_id", "#n": "namespace"},
                "ExpressionAttributeValues": {":a": {"S": actor_id}, ":n": {"S": namespace}},
            }  # fmt: skip
            entry = {"TableName": self.state.table, "Item": _member(shard, subject, rid)}
            writes.append([{"Put": insert}, {"Put": entry}])
        # a refused pair: another writer's key stands, and stays
        self._in_batches(writes, lambda pair: int(self._transact(pair)))

    def _list_known(self, shard: Shard, rid: str, subject: str) -> None:
        """Give a key stored before member lists its entry, while the record still holds it."""
        mark = {"TableName": self.state.table, "Key": _key(rid), "UpdateExpression": "SET m = :one",
                **_holds(shard, subject)}  # fmt: skip
        mark["ExpressionAttributeValues"] = {
            **mark["ExpressionAttributeValues"],
            ":one": {"N": "1"},
        }
        entry = {"TableName": self.state.table, "Item": _member(shard, subject, rid)}
        self._transact([{"Update": mark}, {"Put": entry}])  # refused: the key went meanwhile

    def _transact(self, items: list[dict[str, Any]]) -> bool:
        """One transaction; False when a condition refused it, which every caller reads as
        an answer. Cancelled for throttling or another transaction on its items, it raises
        (``is_conditional_failure``): the caller's run retries the batch (throttling)."""
        try:
            self.state.ddb.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if not is_conditional_failure(exc):
                raise
            return False
        return True

    def _in_batches(
        self, pairs: list[list[dict[str, Any]]], alone: Callable[[list[dict[str, Any]]], int]
    ) -> int:
        """Each record's pair of actions, up to 50 records to a transaction (DynamoDB takes
        100 actions), and how many records' pairs were done. A batch a condition refuses is
        cancelled whole; each of its pairs is then done ``alone`` (the one-record path, with
        its own answer to a refusal, returning 1 when done)."""
        done = 0
        for lo in range(0, len(pairs), _PAIRS):
            batch = pairs[lo : lo + _PAIRS]
            if len(batch) > 1 and self._transact([a for pair in batch for a in pair]):
                done += len(batch)
                continue
            done += sum(alone(pair) for pair in batch)
        return done

    def forget(self, ids: Sequence[str], shard: Shard | None = None) -> int:
        present = self.state.batch_get([_key(i) for i in ids])
        if shard is not None:
            present = [i for i in present if _shard(i) == shard]
        deletes = [key(i["pk"]["S"], "s") for i in present]
        deletes += [_member(_shard(i), i["subject"]["S"], i["pk"]["S"][5:]) for i in present]
        self.state.batch_write(deletes=deletes)
        return len(present)

    def forget_keys(self, shard: Shard, keys: Collection[str]) -> int:
        """Delete every record's key of ``shard`` among ``keys``, found through the member
        lists. Each record's key and entry go in one transaction, conditional on the record
        still holding that key in that shard; an entry whose record holds another key (or
        none) goes in one conditional on exactly that."""
        n = 0
        for subject in sorted(keys):
            rids = [item["sk"]["S"] for item in self.state.query(_members(shard, subject))]
            pairs = [self._forget_pair(shard, subject, rid) for rid in rids]
            n += self._in_batches(pairs, partial(self._forget_alone, shard, subject))
        return n

    def _forget_alone(self, shard: Shard, subject: str, pair: list[dict[str, Any]]) -> int:
        return self._forget_member(shard, subject, _rid(pair))

    def _forget_pair(self, shard: Shard, subject: str, rid: str) -> list[dict[str, Any]]:
        """Delete the record's key, if it still holds ``subject`` in ``shard``, and its entry."""
        table = self.state.table
        holds = {"TableName": table, "Key": _key(rid), **_holds(shard, subject)}
        return [
            {"Delete": holds},
            {"Delete": {"TableName": table, "Key": _member(shard, subject, rid)}},
        ]

    def _forget_member(self, shard: Shard, subject: str, rid: str) -> int:
        pair = self._forget_pair(shard, subject, rid)
        holds, entry = pair[0]["Delete"], pair[1]["Delete"]
        table = self.state.table
        other = {"TableName": table, "Key": _key(rid),
                 "ConditionExpression": "attribute_not_exists(pk) OR NOT (#s = :s AND #a = :a "
                                        "AND #n = :n)",
                 "ExpressionAttributeNames": holds["ExpressionAttributeNames"],
                 "ExpressionAttributeValues": holds["ExpressionAttributeValues"]}  # fmt: skip
        for _ in range(_ATTEMPTS):
            if self._transact(pair):
                return 1
            if self._transact([{"ConditionCheck": other}, {"Delete": entry}]):
                return 0
        raise RuntimeError(f"inferred subject of record {rid!r}: kept changing while forgotten")
