"""The journal in DynamoDB: the same state machine as sqlite.py, nothing on the worker's disk.

Layout in memlife/state/dynamodb.py. Every transition is a conditional write on the state
and attempt count it was validated against (``#st = :from AND attempts = :n``), so two
writers can never both move one operation: the loser gets JournalStateError (the run
lease makes that a bug, not a race to be resolved). ``plan`` is a put on
``attribute_not_exists(pk)``: an operation that exists keeps its state (reruns resume).

Membership items (``jrun#``, ``jrec#``) are written before the operation itself, so
``by_run`` and ``for_record`` are consistent base-table queries that never miss an
operation; a crash between the two leaves a membership without operation, which reads
as nothing and is completed by the rerun's ``plan``. On RECEIPTED the payload and the
``open`` index keys are removed and the operation and its memberships get ``expires_at``
(now + ``ttl_days``) in one transaction: DynamoDB's TTL then drops finished operations.
Each transition sets its mover (``moved_by``, ``moved_after_receipts``: base.Mover); an item
written before movers were recorded lacks both and reads None.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from memlife.journal.base import (
    SECRET_BYTES,
    GroupInReview,
    JournalStateError,
    MemoOutcome,
    Mover,
    Operation,
    OpKind,
    OpState,
    Outcome,
    Rejection,
    check_move,
    checked_secret,
    stored,
)
from memlife.journal.dynamodb_items import (
    from_item,
    memberships,
    op_key,
    refuse_too_large,
    text,
    to_item,
    when,
)
from memlife.model import utcnow
from memlife.state.dynamodb import (
    OPEN_BUCKETS,
    OPEN_INDEX,
    QUERY_WORKERS,
    DynamoState,
    is_conditional_failure,
    key,
)

MEMO_TTL = timedelta(days=180)  # consolidation outcomes (``cout#``) expire: judged again
# a supersede is kept a year at least: superseded retention counts from its time (90 days
# by default; superseded_since.py), which a 30-day TTL would drop first; a removal as long,
# since it voids the supersedes planned before it (a reused id: audit 47a)
SUPERSEDE_TTL = timedelta(days=366)
_KEPT_A_YEAR = (OpKind.supersede, OpKind.delete, OpKind.erase, OpKind.purge)
TRANSACT_MAX = 100  # DynamoDB's limit of items in one TransactWriteItems


class DynamoJournal:
    def __init__(self, state: DynamoState) -> None:
        self.state = state
        self.ttl = timedelta(days=state.settings.ttl_days)

    # -- reads -----------------------------------------------------------------------------------
    def get(self, operation_id: str) -> Operation | None:
        item = self.state.get(op_key(operation_id))
        return from_item(item) if item else None

    def _many(self, ids: Sequence[str]) -> list[Operation]:
        items = self.state.batch_get([op_key(i) for i in dict.fromkeys(ids)])
        return [from_item(i) for i in items]

    def _members(self, pk: str) -> list[str]:
        return [i["sk"]["S"] for i in self.state.query(pk, ProjectionExpression="sk")]

    def by_run(self, run_id: str) -> list[Operation]:
        # the run's own operations only, as SQLite's ``WHERE run_id=?``: ``plan`` writes the
        # membership before its conditional put, so an id another run holds got this run's
        # membership and was listed as this run's (audit 51f), as for_record filters too
        ops = [o for o in self._many(self._members(f"jrun#{run_id}")) if o.run_id == run_id]
        return sorted(ops, key=lambda o: o.operation_id)

    def kept_for(self, kind: OpKind) -> timedelta:
        """How long a receipted operation of ``kind`` (and its memberships) outlives its
        receipt before the TTL drops it: ``receipts verify`` reads one missing past this
        as expired, not as a change the journal never saw (audit 51x3)."""
        return max(self.ttl, SUPERSEDE_TTL) if kind in _KEPT_A_YEAR else self.ttl

    def run_secret(self) -> bytes:
        k = key("meta", "runsecret")
        try:  # create-only: the first writer makes it, everyone reads the same one
            self.state.ddb.put_item(TableName=self.state.table,
                                    Item={**k, "key": {"B": secrets.token_bytes(SECRET_BYTES)}},
                                    ConditionExpression="attribute_not_exists(pk)")  # fmt: skip
        except ClientError as exc:
            if not is_conditional_failure(exc):
                raise
        item = self.state.get(k)
        if item is None:  # written above or by another writer: a consistent read sees it
            raise RuntimeError(f"state table {self.state.table}: the run secret did not persist")
        return self._secret(item)

    def existing_run_secret(self) -> bytes | None:
        """The run secret where one was made, never making it: a dry run writes nothing."""
        item = self.state.get(key("meta", "runsecret"))
        return self._secret(item) if item is not None else None

    def _secret(self, item: dict[str, Any]) -> bytes:
        """Checked as SQLite's is (base.checked_secret): an attribute of another type was a
        bare KeyError, a short key was used as it was (audit 51f)."""
        raw = item.get("key")
        where = f"state table {self.state.table} item meta/runsecret"
        return checked_secret(raw.get("B") if isinstance(raw, dict) else None, where)

    def for_record(self, record_id: str) -> list[Operation]:
        ops = self._many(self._members(f"jrec#{record_id}"))
        return [o for o in ops if record_id in (o.record_id, o.replacement_id)]

    def for_records(self, record_ids: Sequence[str]) -> dict[str, list[Operation]]:
        """``for_record`` of many: the membership queries QUERY_WORKERS at a time, then one
        batched read of every operation they name (a night asks about hundreds of records:
        two calls a record, one after another, before)."""
        ids = list(dict.fromkeys(record_ids))

        def members(rid: str) -> list[str]:
            return self._members(f"jrec#{rid}")

        if len(ids) > 1:
            with ThreadPoolExecutor(min(QUERY_WORKERS, len(ids))) as pool:
                found = list(pool.map(members, ids))
        else:
            found = [members(rid) for rid in ids]
        ops = {o.operation_id: o for o in self._many([op for m in found for op in m])}
        return {
            rid: [ops[i] for i in dict.fromkeys(m)
                  if i in ops and rid in (ops[i].record_id, ops[i].replacement_id)]
            for rid, m in zip(ids, found, strict=True)
        }  # fmt: skip

    def _open_ids(self, **kw: Any) -> list[str]:
        ids: list[str] = []
        for b in range(OPEN_BUCKETS):
            items = self.state.query(f"open#{b}", index=OPEN_INDEX, **kw)
            ids += [i["pk"]["S"][3:] for i in items]
        return ids

    @staticmethod
    def _is_due(o: Operation, now: datetime) -> bool:
        if o.state in (OpState.PLANNED, OpState.APPLIED):
            return True  # a terminal failure (no next_retry_at) is never due by itself
        return o.state is OpState.FAILED and o.next_retry_at is not None and o.next_retry_at <= now

    def due(self, now: datetime, limit: int = 10_000) -> list[Operation]:
        out: list[Operation] = []
        for page in self.due_pages(now, min(limit, 1000)):
            out += page
            if len(out) >= limit:
                return out[:limit]
        return out

    def due_pages(self, now: datetime, page_size: int = 1000) -> Iterator[list[Operation]]:
        """Due operations in (created_at, operation_id) order, page by page. The ``open``
        index is eventually consistent: each page is re-read before its states are trusted,
        so an operation finished meanwhile is not handed out again."""
        keys = []
        for b in range(OPEN_BUCKETS):
            for i in self.state.query(
                f"open#{b}", index=OPEN_INDEX, ProjectionExpression="pk, open_sk"
            ):
                keys.append((i["open_sk"]["S"], i["pk"]["S"][3:]))
        keys.sort()
        for start in range(0, len(keys), page_size):
            chunk = [k[1] for k in keys[start : start + page_size]]
            ops = [o for o in self._many(chunk) if self._is_due(o, now)]
            ops.sort(
                key=lambda o: (o.created_at.isoformat() if o.created_at else "", o.operation_id)
            )
            if ops:
                yield ops

    def terminal_failures(self, include_resolved: bool = False) -> list[Operation]:
        """FAILED with no next retry (still in the ``open`` index: never receipted)."""
        ops = self._many(self._open_ids(ProjectionExpression="pk"))
        out = [
            o
            for o in ops
            if o.state is OpState.FAILED
            and o.next_retry_at is None
            and (include_resolved or o.resolution is None)
        ]
        out.sort(key=lambda o: (o.updated_at.isoformat() if o.updated_at else "", o.operation_id))
        return out

    def resolve(
        self,
        operation_id: str,
        resolution: str,
        at: datetime | None = None,
        retry_at: datetime | None = None,
    ) -> Operation:
        """An operator's decision on a terminal failure (see SqliteJournal.resolve)."""
        when = (at or utcnow()).isoformat()
        values: dict[str, Any] = {
            ":r": {"S": resolution},
            ":w": {"S": when},
            ":failed": {"S": OpState.FAILED.value},
        }
        update = "SET resolution = :r, resolved_at = :w"
        if retry_at is not None:
            update += ", next_retry_at = :n"
            values[":n"] = {"S": retry_at.isoformat()}
        try:
            self.state.ddb.update_item(
                TableName=self.state.table,
                Key=op_key(operation_id),
                UpdateExpression=update,
                ConditionExpression="st = :failed AND attribute_not_exists(next_retry_at)",
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if not is_conditional_failure(exc):
                raise
            raise JournalStateError(f"{operation_id}: not a terminal failure") from None
        return stored(self.get(operation_id), operation_id)

    # -- consolidation rejections (a group's backoff, then review) ----------------------------
    def rejection(self, group_key: str) -> Rejection | None:
        item = self.state.get(key("crej", group_key))
        if item is None:
            return None
        return Rejection(
            attempts=int(item["attempts"]["N"]),
            code=item["last_code"]["S"],
            next_attempt_at=when(text(item, "next_attempt_at")),
        )

    def reject(
        self,
        group_key: str,
        actor_id: str,
        namespace: str,
        code: str,
        next_attempt_at: datetime | None,
        at: datetime,
    ) -> None:
        values: dict[str, Any] = {
            ":a": {"S": actor_id},
            ":ns": {"S": namespace},
            ":c": {"S": code},
            ":u": {"S": at.isoformat()},
            ":0": {"N": "0"},
            ":1": {"N": "1"},
        }
        update = (
            "SET actor_id = :a, #ns = :ns, last_code = :c, updated_at = :u, "
            "attempts = if_not_exists(attempts, :0) + :1"
        )
        if next_attempt_at is None:
            update += " REMOVE next_attempt_at"  # in review: no more automatic attempts
        else:
            update += ", next_attempt_at = :n"
            values[":n"] = {"S": next_attempt_at.isoformat()}
        self.state.ddb.update_item(
            TableName=self.state.table,
            Key=key("crej", group_key),
            UpdateExpression=update,
            ExpressionAttributeNames={"#ns": "namespace"},
            ExpressionAttributeValues=values,
        )

    def clear_rejection(self, group_key: str) -> None:
        self.state.ddb.delete_item(TableName=self.state.table, Key=key("crej", group_key))

    # -- consolidation outcomes (the memo: an unchanged group is not sent again) --------------
    def outcomes(self, memo_keys: Sequence[str]) -> dict[str, MemoOutcome]:
        items = self.state.batch_get([key(f"cout#{k}", "cout") for k in dict.fromkeys(memo_keys)])
        return {
            i["pk"]["S"][5:]: MemoOutcome(
                outcome=i["outcome"]["S"], retry_at=when(text(i, "retry_at"))
            )
            for i in items
        }

    def remember_outcome(
        self,
        memo_key: str,
        actor_id: str,
        namespace: str,
        outcome: str,
        retry_at: datetime | None,
        at: datetime,
    ) -> None:
        item: dict[str, Any] = {
            **key(f"cout#{memo_key}", "cout"),
            "actor_id": {"S": actor_id},
            "namespace": {"S": namespace},
            "outcome": {"S": outcome},
            "updated_at": {"S": at.isoformat()},
            # TTL: a settled group is judged again after MEMO_TTL even if nothing changed
            "expires_at": {"N": str(int((utcnow() + MEMO_TTL).timestamp()))},
        }
        if retry_at is not None:
            item["retry_at"] = {"S": retry_at.isoformat()}
        self.state.ddb.put_item(TableName=self.state.table, Item=item)

    def forget_outcome(self, memo_key: str) -> None:
        self.state.ddb.delete_item(TableName=self.state.table, Key=key(f"cout#{memo_key}", "cout"))

    def groups_in_review(self) -> list[GroupInReview]:
        rows = [
            GroupInReview(
                group_key=i["sk"]["S"],
                actor_id=i["actor_id"]["S"],
                namespace=i["namespace"]["S"],
                attempts=int(i["attempts"]["N"]),
                code=i["last_code"]["S"],
                since=i["updated_at"]["S"],
            )
            for i in self.state.query("crej")
            if "next_attempt_at" not in i
        ]
        return sorted(rows, key=lambda r: r["since"])

    # -- writes ----------------------------------------------------------------------------------
    def plan(self, ops: Sequence[Operation]) -> list[Operation]:
        now, planned = utcnow().isoformat(), list(ops)
        refuse_too_large(planned, now)  # before anything is written (audit 52ii)
        self.state.batch_write(puts=[m for op in ops for m in memberships(op)])
        if self._all_at_once(planned, now):
            ops = []
        for op in ops:
            try:
                self.state.ddb.put_item(
                    TableName=self.state.table,
                    Item=to_item(op, now),
                    ConditionExpression="attribute_not_exists(pk)",
                )
            except ClientError as exc:
                if not is_conditional_failure(exc):
                    raise  # an existing operation keeps its state: that is the point
        found = {o.operation_id: o for o in self._many([op.operation_id for op in planned])}
        return [found[op.operation_id] for op in planned]

    def _all_at_once(self, ops: list[Operation], now: str) -> bool:
        """A group's write and its supersedes in one transaction, as SQLite plans them
        (apply/groups.commit_group): a night stopped between two puts left the write
        without its supersedes, and the rerun wrote it alone, then merged it with its own
        sources into a second replacement. False: put one by one (one operation, more than
        a transaction takes, or some already there: a rerun)."""
        if not 1 < len(ops) <= TRANSACT_MAX:
            return False
        items = [
            {"Put": {"TableName": self.state.table, "Item": to_item(op, now),
                     "ConditionExpression": "attribute_not_exists(pk)"}}
            for op in ops
        ]  # fmt: skip
        try:
            self.state.ddb.transact_write_items(TransactItems=items)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if is_conditional_failure(exc) or code == "ValidationException":  # over 4 MB too
                return False
            raise
        return True

    def transition(
        self,
        operation_id: str,
        to: OpState,
        *,
        outcome: Outcome | None = None,
        error: str | None = None,
        next_retry_at: datetime | None = None,
        at: datetime | None = None,
        by: Mover | None = None,
    ) -> Operation:
        op = self.get(operation_id)
        if op is None:
            raise JournalStateError(f"{operation_id}: no such operation")
        check_move(op, to, outcome)
        attempts = op.attempts + (1 if to in (OpState.APPLIED, OpState.FAILED) else 0)
        when = (at or utcnow()).isoformat()
        names = {"#st": "st", "#at": "attempts"}
        values: dict[str, Any] = {
            ":to": {"S": to.value},
            ":from": {"S": op.state.value},
            ":n": {"N": str(op.attempts)},
            ":n2": {"N": str(attempts)},
            ":u": {"S": when},
        }
        sets = ["#st = :to", "#at = :n2", "updated_at = :u"]
        removes = []
        if outcome is not None:
            sets.append("outcome = :o")
            values[":o"] = {"S": outcome.value}
        for name, value in (
            ("next_retry_at", next_retry_at.isoformat() if next_retry_at else None),
            ("last_error", error),
            ("moved_by", by.run_id if by else None),  # the mover: none named, none kept
        ):
            if value is None:
                removes.append(name)
            else:
                sets.append(f"{name} = :{name}")
                values[f":{name}"] = {"S": value}
        if by is None:
            removes.append("moved_after_receipts")
        else:
            sets.append("moved_after_receipts = :mar")
            values[":mar"] = {"N": str(by.after_receipts)}
        if to is OpState.FAILED:  # a new failure: any earlier operator decision is spent
            removes += ["resolution", "resolved_at"]
        expires = None
        if to is OpState.RECEIPTED:  # payload may hold content: it goes with the receipt
            removes += ["payload", "open_pk", "open_sk"]
            expires = int((utcnow() + self.kept_for(op.kind)).timestamp())
            sets.append("expires_at = :exp")
            values[":exp"] = {"N": str(expires)}
        update = {
            "TableName": self.state.table,
            "Key": op_key(operation_id),
            "UpdateExpression": "SET "
            + ", ".join(sets)
            + (" REMOVE " + ", ".join(removes) if removes else ""),
            "ConditionExpression": "#st = :from AND #at = :n",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        try:
            if expires is None:
                self.state.ddb.update_item(**update)
            else:  # the operation and its memberships expire together
                puts = [
                    {"Put": {"TableName": self.state.table, "Item": m}}
                    for m in memberships(op, expires)
                ]
                self.state.ddb.transact_write_items(TransactItems=[{"Update": update}, *puts])
        except ClientError as exc:
            if not is_conditional_failure(exc):
                raise
            now_op = self.get(operation_id)
            seen = now_op.state if now_op else "absent"
            raise JournalStateError(
                f"{operation_id}: changed by another writer ({op.state} -> {seen}); not moved to {to}"
            ) from None
        op.state, op.attempts, op.updated_at = to, attempts, datetime.fromisoformat(when)
        op.outcome = outcome or op.outcome
        op.next_retry_at, op.last_error = next_retry_at, error
        op.moved_by, op.moved_after_receipts = by if by is not None else (None, None)
        if to is OpState.RECEIPTED:
            op.payload = None
        if to is OpState.FAILED:
            op.resolution = op.resolved_at = None
        return op

    def forget_payloads(self, record_ids: Sequence[str]) -> int:
        n = 0
        for rid in record_ids:
            # payloads naming the record (e.g. a replacement superseding it): open operations
            # only. Payloads are raw UTF-8 JSON (pydantic) and json.dumps escapes: both forms
            found = {op_id: json.dumps(rid) for op_id in self._members(f"jrec#{rid}")}
            for quoted in (json.dumps(rid), json.dumps(rid, ensure_ascii=False)):
                for op_id in self._open_ids(
                    FilterExpression="contains(payload, :q)",
                    ExpressionAttributeValues={":q": {"S": quoted}},
                ):
                    found[op_id] = quoted
            for op_id, quoted in sorted(found.items()):
                try:
                    self.state.ddb.update_item(
                        TableName=self.state.table,
                        Key=op_key(op_id),
                        UpdateExpression="REMOVE payload",
                        ConditionExpression="attribute_exists(payload) AND (record_id = :r OR "
                        "replacement_id = :r OR contains(payload, :q))",
                        ExpressionAttributeValues={":r": {"S": rid}, ":q": {"S": quoted}},
                    )
                    n += 1
                except ClientError as exc:
                    if not is_conditional_failure(exc):
                        raise
        return n
