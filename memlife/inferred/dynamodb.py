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
record id. It is written before the key it lists, so no key is stored that
:meth:`DynamoSubjects.forget_keys` cannot find; an entry is only a pointer, checked
against the record's own item before anything is deleted. Keys stored before member lists
existed have none and stay on the records grouped under them until those records go.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from memlife.model import utcnow
from memlife.state.dynamodb import DynamoState, Key, is_conditional_failure, key

Shard = tuple[str, str]


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


class DynamoSubjects:
    def __init__(self, state: DynamoState) -> None:
        self.state = state

    def get(self, shard: Shard, ids: Sequence[str]) -> dict[str, str]:
        items = self.state.batch_get([_key(i) for i in ids])
        return {i["pk"]["S"][5:]: i["subject"]["S"] for i in items if _shard(i) == shard}

    def put(self, actor_id: str, namespace: str, subjects: Mapping[str, str], how: str) -> None:
        shard = (actor_id, namespace)
        # the common case on later nights: all known, no write
        known = self.get(shard, list(subjects))
        new = {rid: subject for rid, subject in subjects.items() if rid not in known}
        if not new:
            return
        self.state.batch_write(puts=[_member(shard, s, rid) for rid, s in new.items()])
        now = utcnow().isoformat()
        lost: list[str] = []
        for rid, subject in new.items():
            item = {**_key(rid), "actor_id": {"S": actor_id}, "namespace": {"S": namespace},
                    "subject": {"S": subject}, "how": {"S": how}, "assigned_at": {"S": now}}  # fmt: skip
            try:
                self.state.ddb.put_item(
                    TableName=self.state.table, Item=item,
                    ConditionExpression="attribute_not_exists(pk) OR #a <> :a OR #n <> :n",
                    ExpressionAttributeNames={"#a": "actor_id", "#n": "namespace"},
                    ExpressionAttributeValues={":a": {"S": actor_id}, ":n": {"S": namespace}},
                )  # fmt: skip
            except ClientError as exc:  # another writer was first: its key stands
                if not is_conditional_failure(exc):
                    raise
                lost.append(rid)
        if lost:  # our member entry lists a key the record does not hold (unless it is the same)
            stood = self.get(shard, lost)
            stale = [_member(shard, new[rid], rid) for rid in lost if stood.get(rid) != new[rid]]
            self.state.batch_write(deletes=stale)

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
        lists; each delete is conditional on the item still holding that key in that shard
        (another shard may have taken the id since)."""
        n = 0
        for subject in sorted(keys):
            listed = [i["sk"]["S"] for i in self.state.query(_members(shard, subject))]
            for rid in listed:
                try:
                    self.state.ddb.delete_item(
                        TableName=self.state.table, Key=_key(rid),
                        ConditionExpression="#s = :s AND #a = :a AND #n = :n",
                        ExpressionAttributeNames={"#s": "subject", "#a": "actor_id",
                                                  "#n": "namespace"},
                        ExpressionAttributeValues={":s": {"S": subject}, ":a": {"S": shard[0]},
                                                   ":n": {"S": shard[1]}},
                    )  # fmt: skip
                    n += 1
                except ClientError as exc:  # a stale entry: the record holds another key
                    if not is_conditional_failure(exc):
                        raise
            self.state.batch_write(deletes=[_member(shard, subject, rid) for rid in listed])
        return n
