"""The run lease in DynamoDB: one lifecycle writer per store at a time (invariant 9).

One item per store (``lease#{store identity}``) with the holder and an expiry. Taking it
is a conditional put that succeeds only when there is no lease, it has expired, or it is
already ours (a resumed holder); renewing and releasing are conditional on still being
the holder. A worker that dies simply stops renewing: once ``expires_at`` has passed the
next run takes over (its retry queue then resumes what the dead one left). ``expires_at``
is also the table's TTL attribute, so abandoned leases disappear by themselves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from memlife.errors import MemlifeError, Reason
from memlife.state.dynamodb import DynamoState, Key, is_conditional_failure, key


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat()


def _holder(item: dict[str, Any]) -> dict[str, str]:
    """The lease item as memlife.lease reports a holder (owner, run id, purpose, times)."""
    return {
        "owner": item.get("holder", {}).get("S", "?"),
        "run_id": item.get("run_id", {}).get("S", "?"),
        "purpose": item.get("purpose", {}).get("S", "?"),
        "acquired_at": item.get("acquired_at", {}).get("S", "?"),
        "expires_at": _iso(float(item.get("expires_at", {}).get("N", "0"))),
    }


class LeaseHeld(MemlifeError, RuntimeError):
    """Another writer holds the store's lease: a clear refusal, never a wait."""

    default_code = Reason.LEASE_HELD

    def __init__(
        self, store: str, holder: str, expires_at: float, item: dict[str, str] | None = None
    ) -> None:
        self.store, self.holder, self.expires_at = store, holder, expires_at
        self.item = item or {}  # the holder's run id, purpose, acquired_at
        left = max(0, int(expires_at - time.time()))
        super().__init__(f"store {store} is leased to {holder} for another {left}s")


@dataclass
class DynamoLease:
    state: DynamoState
    store: str  # memlife.stores.store_identity(...)
    holder: str  # who we are: run id + host + pid, for the refusal message
    ttl_s: int = 600

    def _key(self) -> Key:
        return key(f"lease#{self.store}", "lease")

    def acquire(self, run_id: str = "", purpose: str = "lifecycle") -> dict[str, str] | None:
        """Take the lease or raise LeaseHeld; returns the expired holder it took over, if any."""
        now = time.time()
        item = {
            **self._key(),
            "holder": {"S": self.holder},
            "run_id": {"S": run_id},
            "purpose": {"S": purpose},
            "acquired_at": {"S": _iso(now)},
            "expires_at": {"N": str(int(now + self.ttl_s))},
        }
        old = None
        for attempt in range(3):  # refused, then released before the refusal read it: again
            try:
                old = self.state.ddb.put_item(
                    TableName=self.state.table,
                    Item=item,
                    ReturnValues="ALL_OLD",
                    ConditionExpression=(
                        "attribute_not_exists(pk) OR expires_at < :now OR holder = :me"
                    ),
                    ExpressionAttributeValues={
                        ":now": {"N": str(int(now))},
                        ":me": {"S": self.holder},
                    },
                ).get("Attributes")
                break
            except ClientError as exc:
                if not is_conditional_failure(exc):
                    raise
                if self.state.get(self._key()) or attempt == 2:
                    self._refuse()
        if not old or old["holder"]["S"] == self.holder:
            return None
        return _holder(old)

    def renew(self, run_id: str | None = None) -> None:
        """Extend our lease; LeaseHeld if it was lost (expired and taken by another)."""
        values = {":e": {"N": str(int(time.time() + self.ttl_s))}, ":me": {"S": self.holder}}
        update = "SET expires_at = :e"
        if run_id:
            update += ", run_id = :r"
            values[":r"] = {"S": run_id}
        try:
            self.state.ddb.update_item(
                TableName=self.state.table,
                Key=self._key(),
                UpdateExpression=update,
                ConditionExpression="holder = :me",
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if not is_conditional_failure(exc):
                raise
            self._refuse()

    def release(self) -> None:
        """Give the lease back (a no-op when it is no longer ours)."""
        try:
            self.state.ddb.delete_item(
                TableName=self.state.table,
                Key=self._key(),
                ConditionExpression="holder = :me",
                ExpressionAttributeValues={":me": {"S": self.holder}},
            )
        except ClientError as exc:
            if not is_conditional_failure(exc):
                raise

    def _refuse(self) -> None:
        item = self.state.get(self._key()) or {}
        raise LeaseHeld(
            self.store,
            item.get("holder", {}).get("S", "?"),
            float(item.get("expires_at", {}).get("N", "0")),
            _holder(item) if item else None,
        )

    def __enter__(self) -> DynamoLease:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
