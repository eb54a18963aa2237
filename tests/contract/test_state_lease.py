"""The DynamoDB run lease: one lifecycle writer per store; a second gets a clear refusal."""

from __future__ import annotations

import time

import pytest

import memlife.lease as lease_mod
import memlife.state as state_mod
from memlife.journal import open_journal
from memlife.state.dynamodb import _STORE, StateTableInUse
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
    assert dead.acquire("run-1", "nightly") is None
    taker = DynamoLease(state, "s", "next-night", ttl_s=60)
    old = taker.acquire("run-2", "nightly")
    assert old is not None and (old["owner"], old["run_id"], old["purpose"]) == (
        "worker-killed",
        "run-1",
        "nightly",
    )  # named in the taker's receipt
    with pytest.raises(LeaseHeld) as refused:
        DynamoLease(state, "s", "third", ttl_s=60).acquire("run-3")
    assert refused.value.item["run_id"] == "run-2"
    taker.renew("run-2b")
    with pytest.raises(LeaseHeld) as refused:
        DynamoLease(state, "s", "third", ttl_s=60).acquire("run-3")
    assert refused.value.item["run_id"] == "run-2b"
    dead.ttl_s = 60
    with pytest.raises(LeaseHeld, match="next-night"):
        dead.renew()
    taker.renew()


def test_memlife_lease_uses_the_state_table_for_remote_stores(monkeypatch) -> None:
    import memlife.state as state_mod
    from memlife import lease as lifecycle
    from memlife.model import utcnow

    class AgentCoreLike:
        connection = None
        url = "agentcore://mem-9?region=us-east-1&endpoint_url=http://x"

    with aws_state("inprocess") as (url, st):
        monkeypatch.setenv("MEMLIFE_STATE", url)
        monkeypatch.setattr(state_mod, "_open", {url: st})
        held = lifecycle.for_store(AgentCoreLike(), "run-a", "nightly")
        try:
            item = st.get({"pk": {"S": "lease#agentcore://mem-9@us-east-1"}, "sk": {"S": "lease"}})
            assert item["run_id"]["S"] == "run-a" and item["holder"]["S"] == lifecycle.OWNER
            other = lifecycle.DynamoBackend(st, "agentcore://mem-9@us-east-1")
            now = utcnow()
            ok, holder = other.lease_acquire(lifecycle.NAME, "elsewhere:1", "run-b", "erase", now,
                                             now + lifecycle.ttl())  # fmt: skip
            assert not ok and holder["run_id"] == "run-a"
            assert "run-a" in str(lifecycle.LeaseHeld(holder))
        finally:
            held.release()
        assert (
            st.get({"pk": {"S": "lease#agentcore://mem-9@us-east-1"}, "sk": {"S": "lease"}}) is None
        )


class _AgentCoreStore:
    connection = None  # no SQLite file: its state lives in the table

    def __init__(self, memory: str) -> None:
        self.url = f"agentcore://{memory}?region=us-east-1"


@pytest.mark.parametrize("mode", ["inprocess", "server"])
def test_one_state_table_serves_one_store(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Adversarial review: two AgentCore stores on one state table shared its journal,
    review items and tombstones (keyed without the store): store B's retry run applied
    store A's operations (a receipted delete of a record still present). A writer's lease
    binds the table to its store; any other store is refused before it reads or writes,
    and a reader (a dry run) binds nothing."""
    a, b = _AgentCoreStore("mem-a"), _AgentCoreStore("mem-b")
    with aws_state(mode) as (url, state):
        monkeypatch.setenv("MEMLIFE_STATE", url)
        monkeypatch.setattr(state_mod, "_open", {url: state})
        open_journal(b)  # a reader of a table that serves no store yet: binds nothing
        assert state.get(_STORE) is None
        lease_mod.for_store(a, "run-a", "nightly").release()
        assert state.get(_STORE)["store"]["S"] == "agentcore://mem-a@us-east-1"
        for use in (lambda: lease_mod.for_store(b, "run-b", "nightly"), lambda: open_journal(b)):
            with pytest.raises(StateTableInUse, match="serves store agentcore://mem-a@us-east-1"):
                use()
        open_journal(a)  # its own store goes on
        lease_mod.for_store(a, "run-a2", "nightly").release()
