"""Inferred subjects in the DynamoDB state table: ``infs#{record_id}`` / ``s``.

A key holds a few content words (for the reviewer), so erasure deletes it with the record
(:meth:`DynamoSubjects.forget`, called by the erase applier). Inserts are conditional
(``attribute_not_exists``): a key, once given, never moves, even when ``remember`` on one
machine and the nightly run on another infer the same record at once. A key is its shard's:
an item another actor's or namespace's record left under a reused id is neither returned
nor kept (the insert's condition lets a new shard take it over).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from botocore.exceptions import ClientError

from memlife.model import utcnow
from memlife.state.dynamodb import DynamoState, is_conditional_failure, key


def _key(record_id: str) -> dict[str, dict[str, str]]:
    return key(f"infs#{record_id}", "s")


def _shard(item: dict[str, dict[str, str]]) -> tuple[str, str]:
    return item["actor_id"]["S"], item["namespace"]["S"]


class DynamoSubjects:
    def __init__(self, state: DynamoState) -> None:
        self.state = state

    def get(self, shard: tuple[str, str], ids: Sequence[str]) -> dict[str, str]:
        items = self.state.batch_get([_key(i) for i in ids])
        return {i["pk"]["S"][5:]: i["subject"]["S"] for i in items if _shard(i) == shard}

    def put(self, actor_id: str, namespace: str, subjects: Mapping[str, str], how: str) -> None:
        # the common case on later nights: all known, no write
        known = self.get((actor_id, namespace), list(subjects))
        now = utcnow().isoformat()
        for rid, subject in subjects.items():
            if rid in known:
                continue
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

    def forget(self, ids: Sequence[str], shard: tuple[str, str] | None = None) -> int:
        present = self.state.batch_get([_key(i) for i in ids])
        if shard is not None:
            present = [i for i in present if _shard(i) == shard]
        self.state.batch_write(deletes=[key(i["pk"]["S"], "s") for i in present])
        return len(present)

    def forget_keys(self, shard: tuple[str, str], keys: Collection[str]) -> int:
        """Items are keyed by record id, with no index by shard: the other records under a
        removed record's key keep it here (docs/adversarial-review.md, "Left")."""
        return 0
