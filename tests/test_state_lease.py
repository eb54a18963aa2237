"""The DynamoDB run lease: one lifecycle writer per store; a second gets a clear refusal."""

from __future__ import annotations

import time

import pytest

from memlife.state.lease import DynamoLease, LeaseHeld
from tests.support.aws_state import aws_state


@pytest.fixture(params=["inprocess", "server"])
def state(request):
    with aws_state(request.param) as (_, st):
        yield st


def test_second_writer_is_refused_until_release(state) -> None:
    a = DynamoLease(state, "agentcore://mem-1@us-east-1", "run-a@host:1", ttl_s=60)
    b = DynamoLease(state, "agentcore://mem-1@us-east-1", "run-b@host:2", ttl_s=60)
    other_store = DynamoLease(state, "agentcore://mem-2@us-east-1", "run-b@host:2", ttl_s=60)
    a.acquire()
    a.acquire()  # the holder may take it again (a resumed run)
    with pytest.raises(LeaseHeld, match="leased to run-a@host:1") as refused:
        b.acquire()
    assert refused.value.holder == "run-a@host:1" and refused.value.expires_at > time.time()
    other_store.acquire()  # leases are per store
    with pytest.raises(LeaseHeld):
        b.renew()  # renewing a lease you do not hold is a refusal too
    b.release()  # not ours: a no-op, a keeps it
    with pytest.raises(LeaseHeld):
        b.acquire()
    a.release()
    with b:
        with pytest.raises(LeaseHeld):
            a.acquire()
    a.acquire()


def test_an_expired_lease_is_taken_over_and_the_old_holder_cannot_renew(state) -> None:
    dead = DynamoLease(state, "s", "worker-killed", ttl_s=-5)  # already past its expiry
    dead.acquire()
    taker = DynamoLease(state, "s", "next-night", ttl_s=60)
    taker.acquire()
    dead.ttl_s = 60
    with pytest.raises(LeaseHeld, match="next-night"):
        dead.renew()
    taker.renew()
