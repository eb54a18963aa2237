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

from botocore.exceptions import ClientError

from memlife.errors import MemlifeError, Reason
from memlife.state.dynamodb import DynamoState, is_conditional_failure, key


class LeaseHeld(MemlifeError, RuntimeError):
    """Another writer holds the store's lease: a clear refusal, never a wait."""

    default_code = Reason.LEASE_HELD

    def __init__(self, store: str, holder: str, expires_at: float) -> None:
        self.store, self.holder, self.expires_at = store, holder, expires_at
        left = max(0, int(expires_at - time.time()))
        super().__init__(f"store {store} is leased to {holder} for another {left}s")


@dataclass
class DynamoLease:
    state: DynamoState
    store: str  # memlife.stores.store_identity(...)
    holder: str  # who we are: run id + host + pid, for the refusal message
    ttl_s: int = 600

    def _key(self) -> dict:
        return key(f"lease#{self.store}", "lease")

    def acquire(self) -> None:
        """Take the lease or raise LeaseHeld (an expired lease is taken over)."""
        now = time.time()
        try:
            self.state.ddb.put_item(
                TableName=self.state.table,
                Item={
                    **self._key(),
                    "holder": {"S": self.holder},
                    "expires_at": {"N": str(int(now + self.ttl_s))},
                },
                ConditionExpression="attribute_not_exists(pk) OR expires_at < :now OR holder = :me",
                ExpressionAttributeValues={":now": {"N": str(int(now))}, ":me": {"S": self.holder}},
            )
        except ClientError as exc:
            if not is_conditional_failure(exc):
                raise
            self._refuse()

    def renew(self) -> None:
        """Extend our lease; LeaseHeld if it was lost (expired and taken by another)."""
        try:
            self.state.ddb.update_item(
                TableName=self.state.table,
                Key=self._key(),
                UpdateExpression="SET expires_at = :e",
                ConditionExpression="holder = :me",
                ExpressionAttributeValues={
                    ":e": {"N": str(int(time.time() + self.ttl_s))},
                    ":me": {"S": self.holder},
                },
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
        )

    def __enter__(self) -> DynamoLease:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
