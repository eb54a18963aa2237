"""The run lease in DynamoDB: one lifecycle writer per store at a time (invariant 9).

One item per store (``lease#{store identity}``) with the holder and an expiry. Taking it
is a conditional put that succeeds only when there is no lease, it has expired, or it is
already ours (a resumed holder); renewing and releasing are conditional on still being
the holder. A worker that dies simply stops renewing: once ``expires_at`` has passed the
next run takes over (its retry queue then resumes what the dead one left). ``expires_at``
is also the table's TTL attribute, so abandoned leases disappear by themselves.

``expires_at`` is written on the holder's clock and read on the taker's, so it alone cannot
tell a dead holder from a live one whose clock runs behind. Every renewal also adds one to
``beat``; a lease that looks expired is taken over only after its beat has stood still
for half its holder's TTL on the taker's own monotonic clock (the holder beats every third
and trusts a renewal for a third), and only if the beat is still the one watched.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NoReturn

from botocore.exceptions import ClientError

from memlife.errors import MemlifeError, Reason
from memlife.state.dynamodb import DynamoState, Key, is_conditional_failure, key

log = logging.getLogger(__name__)
_REFUSED = object()  # a conditional put the lease's state refused
MAX_TTL_S = 86_400  # the longest lease memlife writes (settings: MEMLIFE_LEASE_TTL_SECONDS)


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
        """Take the lease or raise LeaseHeld; returns the expired holder it took over, if any.
        A lease that looks expired costs a watch of half its holder's TTL (_watch)."""
        free = "attribute_not_exists(pk) OR holder = :me"
        for _ in range(3):  # the lease changed hands while we looked: look again
            old = self._put(run_id, purpose, free, {":me": {"S": self.holder}})
            if old is not _REFUSED:
                return None  # free, or ours already (a resumed holder)
            seen = self.state.get(self._key())
            if not seen:
                continue  # released since the refusal
            if float(seen.get("expires_at", {}).get("N", "0")) >= time.time():
                self._refuse(seen)
            old = self._put(run_id, purpose, *self._watch(seen))
            if old is not _REFUSED:
                return _holder(old)
            now_seen = self.state.get(self._key())
            if now_seen and now_seen.get("holder") == seen.get("holder"):
                log.warning("lease of %s looked expired here but its holder renewed it while "
                            "watched: this worker's clock may run ahead", self.store)  # fmt: skip
                self._refuse(now_seen)  # alive: its clock and ours disagree
        self._refuse()

    def _watch(self, seen: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Wait half the holder's TTL on our own clock; return the condition that takes the
        lease only if nobody renewed it meanwhile (the same holder, beat and expiry)."""
        holder_ttl = float(seen.get("ttl_s", {}).get("N", str(self.ttl_s)))
        holder_ttl = min(holder_ttl, float(MAX_TTL_S))  # a foreign item's: at most a day
        log.info("lease of %s looks expired on this clock: watching its beat for %.0fs before "
                 "taking it over", self.store, max(0.0, holder_ttl / 2))  # fmt: skip
        time.sleep(max(0.0, holder_ttl / 2))
        values = {":them": seen["holder"], ":exp": seen["expires_at"]}
        beat = "attribute_not_exists(beat)"  # a lease written before beats were counted
        if "beat" in seen:
            beat, values[":beat"] = "beat = :beat", seen["beat"]
        # the same take too: a process's leases share a holder name and a second's expiry,
        # and a lease given back and taken again meanwhile starts its beat at 0 again
        took = "attribute_not_exists(acquired_at)"
        if "acquired_at" in seen:
            took, values[":took"] = "acquired_at = :took", seen["acquired_at"]
        return f"holder = :them AND expires_at = :exp AND {beat} AND {took}", values

    def _put(self, run_id: str, purpose: str, condition: str, values: dict[str, Any]) -> Any:
        """Write the lease as ours if ``condition`` holds: the old item (or None), or _REFUSED."""
        now = time.time()
        item = {
            **self._key(),
            "holder": {"S": self.holder},
            "run_id": {"S": run_id},
            "purpose": {"S": purpose},
            "acquired_at": {"S": _iso(now)},
            "expires_at": {"N": str(int(now + self.ttl_s))},
            "ttl_s": {"N": str(self.ttl_s)},
            "beat": {"N": "0"},
        }
        try:
            return self.state.ddb.put_item(
                TableName=self.state.table,
                Item=item,
                ReturnValues="ALL_OLD",
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
            ).get("Attributes")
        except ClientError as exc:
            if not is_conditional_failure(exc):
                raise
            return _REFUSED

    def renew(self, run_id: str | None = None) -> None:
        """Extend our lease and count a beat; LeaseHeld if it was lost (taken by another)."""
        values = {
            ":e": {"N": str(int(time.time() + self.ttl_s))},
            ":me": {"S": self.holder},
            ":zero": {"N": "0"},
            ":one": {"N": "1"},
        }
        update = "SET expires_at = :e, beat = if_not_exists(beat, :zero) + :one"
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

    def _refuse(self, seen: dict[str, Any] | None = None) -> NoReturn:
        item = seen or self.state.get(self._key()) or {}
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
