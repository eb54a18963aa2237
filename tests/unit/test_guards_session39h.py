"""Guards left untested by the thirty-ninth audit h (session 39): two writers at once when the
run's state lives off the worker (the lease and the operation journal in DynamoDB, moto).

The lease's expiry is taken and renewed on the writer's own clock (``memlife.state.lease``
reads ``time.time``): each test gives a writer its clock by replacing that module's
``time`` (a worker paused, or another worker whose clock runs ahead), never by sleeping.
Interleavings of two journal writers are made by a hook between one writer's read and its
conditional write (the other writer moves the operation there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import memlife.lease as lease_mod
import memlife.state as state_mod
import memlife.state.lease as dynamo_lease_mod
from memlife.errors import JournalStateError
from memlife.journal import Operation, OpKind, OpState, Outcome, SqliteJournal, operation_id
from memlife.journal.dynamodb import DynamoJournal
from memlife.lease import LeaseLost
from memlife.state.dynamodb import DynamoState
from memlife.state.lease import DynamoLease, LeaseHeld
from tests.support.aws_state import aws_state

STORE = "agentcore://mem-39h@us-east-1"
OTHER = "elsewhere-host/boot/1:4242:beef"  # another worker (host:pid:nonce)


class _AgentCoreStore:
    """What memlife.lease asks of a remote store: no SQLite connection, a URL."""

    connection = None
    url = "agentcore://mem-39h?region=us-east-1"


@pytest.fixture()
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoState]:
    """The state table in moto (in-process), named by MEMLIFE_STATE; a 60 s lease TTL, so
    the heartbeat (every 20 s) never beats inside a test."""
    monkeypatch.setenv("MEMLIFE_LEASE_TTL_SECONDS", "60")
    with aws_state("inprocess", table="memlife-39h") as (url, state):
        monkeypatch.setenv("MEMLIFE_STATE", url)
        monkeypatch.setattr(state_mod, "_open", {url: state})
        yield state


class _Clock:
    """A writer's wall clock as memlife.state.lease reads it (``time.time``), and its sleep
    (the watch of a lease that looks expired): time passes, and whatever else runs meanwhile
    (``meanwhile``: a live holder's heartbeat) runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, now: float) -> None:
        self.now = now
        self.slept: list[float] = []
        self.meanwhile: list[Callable[[], None]] = []
        monkeypatch.setattr(
            dynamo_lease_mod, "time", SimpleNamespace(time=lambda: self.now, sleep=self._sleep)
        )

    def _sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        for run in self.meanwhile:
            run()


def _lease_item(state: DynamoState) -> dict[str, Any] | None:
    return state.get({"pk": {"S": f"lease#{STORE}"}, "sk": {"S": "lease"}})


# -- 1. the fence over the DynamoDB lease: a paused writer's lease taken over ---------------
def test_a_dynamodb_lease_taken_over_while_its_writer_paused_stops_its_next_write(
    aws: DynamoState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``except DynamoHeld: return False`` in `memlife/lease.py::DynamoBackend.
    lease_renew` and ``holder = :me`` in `memlife/state/lease.py::DynamoLease.renew` and
    ``release``. A nightly run's lease (AgentCore store, state in DynamoDB) expires while its
    worker is paused; a second run takes it over. When the first resumes, the fence before
    its next write (lease.fence_for, what the executor calls) must stop it, and giving its
    lease back must leave the second run's lease in place (else a third writer starts)."""
    store = _AgentCoreStore()
    clock = _Clock(monkeypatch, 1_000_000.0)
    paused = lease_mod.for_store(store, "run-paused", "nightly")
    try:
        paused._stop.set()  # no heartbeat: the fence alone
        lease_mod.fence_for(store)()  # ours: the write goes on
        item = _lease_item(aws)
        assert item is not None
        aws.ddb.update_item(  # the paused run's lease ran out (60 s and more ago)
            TableName=aws.table,
            Key={"pk": item["pk"], "sk": item["sk"]},
            UpdateExpression="SET expires_at = :past",
            ExpressionAttributeValues={":past": {"N": "1"}},
        )
        took = DynamoLease(aws, STORE, OTHER, ttl_s=60).acquire("run-taker", "nightly")
        assert took is not None and took["run_id"] == "run-paused"
        assert clock.slept == [30.0]  # its beat watched for half its TTL first
        paused._confirmed -= paused.ttl.total_seconds()  # its last renewal was before the pause
        with pytest.raises(LeaseLost, match="run-paused"):
            lease_mod.fence_for(store)()
        with pytest.raises(LeaseLost):  # sticky
            paused.check()
    finally:
        paused.release()
    held = _lease_item(aws)
    assert held is not None and held["holder"]["S"] == OTHER and held["run_id"]["S"] == "run-taker"
    with pytest.raises(LeaseHeld, match=OTHER):
        DynamoLease(aws, STORE, "third-host:1:x", ttl_s=60).acquire("run-third")


# -- 2. the expiry a lease is taken and renewed with --------------------------------------
def test_a_dead_writers_lease_is_taken_over_exactly_once_its_ttl_has_run_out(
    aws: DynamoState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``now + self.ttl_s`` in `memlife/state/lease.py::DynamoLease._put` and
    ``time.time() + self.ttl_s`` in ``renew``. A worker killed mid-run stops renewing; the
    next run takes over once the TTL since its last renewal has passed and its beat stood
    still for half a TTL more, not before (two writers) and not later (the nights stall)."""
    clock = _Clock(monkeypatch, 1_000_000.0)
    dead = DynamoLease(aws, STORE, "killed-host:1:a", ttl_s=60)
    dead.acquire("run-killed", "nightly")
    nxt = DynamoLease(aws, STORE, OTHER, ttl_s=60)
    clock.now += 50
    dead.renew()  # its last heartbeat: good until +110
    clock.now += 59
    with pytest.raises(LeaseHeld, match="killed-host"):
        nxt.acquire("run-next", "nightly")
    clock.now += 2  # 61 s after the last renewal
    took = nxt.acquire("run-next", "nightly")
    assert took is not None and took["run_id"] == "run-killed"
    assert clock.slept == [30.0]  # refused at once while it looked alive; then one watch
    clock.now += 59  # the taker's own lease, 59 s after it was taken: still its own
    with pytest.raises(LeaseHeld, match=OTHER):
        DynamoLease(aws, STORE, "third-host:1:x", ttl_s=60).acquire("run-third")
    clock.now += 2
    assert DynamoLease(aws, STORE, "third-host:1:x", ttl_s=60).acquire("run-third") is not None


# -- 3. the journal's conditional transitions against a second writer --------------------
def _op(rid: str) -> Operation:
    return Operation(
        operation_id=operation_id("run-39h", OpKind.delete, [rid]),
        run_id="run-39h",
        kind=OpKind.delete,
        actor_id="u-1",
        namespace="/users/u-1/facts",
        record_id=rid,
        reasons=["HARD_EXPIRED"],
        policy_version="p1",
        content_sha256="ab" * 32,
    )


def _racing(
    monkeypatch: pytest.MonkeyPatch,
    stale: DynamoJournal | SqliteJournal,
    other: DynamoJournal | SqliteJournal,
    move: Callable[[Any], None],
) -> None:
    """Between ``stale``'s read of an operation and its conditional write, ``other`` moves
    it (``move(other)``): a second process driving the same operation."""
    read = stale.get

    def get_then_other_moves(op_id: str) -> Operation | None:
        seen = read(op_id)
        monkeypatch.setattr(stale, "get", read)  # once
        move(other)
        return seen

    monkeypatch.setattr(stale, "get", get_then_other_moves)


def test_a_retry_of_a_failure_another_writer_retried_meanwhile_is_refused(
    aws: DynamoState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``AND #at = :n`` in `memlife/journal/dynamodb.py::DynamoJournal.transition`.
    Two processes resume one retryable failure (FAILED, 1 attempt). One fails it again
    (FAILED, 2 attempts); the other, which read it as FAILED/1, must not then mark it
    APPLIED: the state alone is unchanged (FAILED), only the attempt count tells."""
    first, second = DynamoJournal(aws), DynamoJournal(DynamoState(aws.settings))
    (a,) = first.plan([_op("m-1")])
    first.transition(a.operation_id, OpState.FAILED, outcome=Outcome.failed, error="THROTTLED")

    def fail_again(j: DynamoJournal) -> None:
        j.transition(a.operation_id, OpState.FAILED, outcome=Outcome.failed, error="THROTTLED")

    _racing(monkeypatch, first, second, fail_again)
    with pytest.raises(JournalStateError, match="another writer"):
        first.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    now = second.get(a.operation_id)
    assert now is not None and (now.state, now.attempts) == (OpState.FAILED, 2)


def test_an_operation_is_receipted_once_when_two_writers_receipt_it(
    aws: DynamoState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``#st = :from`` in `memlife/journal/dynamodb.py::DynamoJournal.transition`.
    APPLIED -> RECEIPTED keeps the attempt count, so only the state condition stops a second
    writer that read APPLIED from receipting it again (its RECEIPTED moved a second time,
    its mover rewritten by a stale writer)."""
    first, second = DynamoJournal(aws), DynamoJournal(DynamoState(aws.settings))
    (a,) = first.plan([_op("m-2")])
    first.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted)

    def receipt(j: DynamoJournal) -> None:
        j.transition(a.operation_id, OpState.RECEIPTED)

    _racing(monkeypatch, first, second, receipt)
    with pytest.raises(JournalStateError, match="another writer"):
        first.transition(a.operation_id, OpState.RECEIPTED)


# -- 4. clock skew between workers ----------------------------------------------------------
def test_a_worker_whose_clock_runs_ahead_does_not_take_a_live_lease(
    aws: DynamoState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks the watch of `memlife/state/lease.py::DynamoLease.acquire` (``_watch``: the
    beat, holder and expiry a takeover is conditional on). A nightly run holds the store's
    lease and has just renewed it. A manual run on another worker whose clock is 61 s ahead
    (TTL 60 s) sees the lease as expired; the holder's heartbeat beats while it watches
    (every 20 s, on the holder's own clock): it must be refused (LeaseHeld), else two
    lifecycle writers share the store (invariant 9). Once the holder stops beating (killed),
    the same worker takes the lease over and the old holder's fence stops its next write."""
    store = _AgentCoreStore()
    clock = _Clock(monkeypatch, 1_000_000.0)
    holder = lease_mod.for_store(store, "run-nightly", "nightly")

    def heartbeat() -> None:  # the holder's thread, on the holder's clock (61 s behind)
        clock.now -= 61
        try:
            now = lease_mod.utcnow()
            span = now + holder.ttl
            assert holder.backend.lease_renew(lease_mod.NAME, lease_mod.OWNER, now, span)
        finally:
            clock.now += 61

    try:
        holder._stop.set()
        holder._confirmed -= holder.ttl.total_seconds()
        lease_mod.fence_for(store)()  # renewed now, on the holder's clock
        clock.now += 61  # the other worker's clock (the holder's renewal is a moment old)
        other = DynamoLease(aws, STORE, OTHER, ttl_s=60)
        clock.meanwhile.append(heartbeat)
        with pytest.raises(LeaseHeld, match="lifecycle|leased"):
            other.acquire("run-manual", "manual:erase")
        assert clock.slept == [30.0]
        clock.now -= 61
        lease_mod.fence_for(store)()  # the holder: still its own, it writes on
        clock.now += 61
        clock.meanwhile.clear()  # the holder is killed: no beat any more
        took = other.acquire("run-manual", "manual:erase")
        assert took is not None and took["run_id"] == "run-nightly"
        holder._confirmed -= holder.ttl.total_seconds()  # its trust ran out while watched
        with pytest.raises(LeaseLost, match="run-nightly"):
            lease_mod.fence_for(store)()
    finally:
        holder.release()
    held = _lease_item(aws)
    assert held is not None and held["holder"]["S"] == OTHER


def test_a_lease_that_changes_hands_while_watched_is_not_taken(
    aws: DynamoState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks the condition ``holder = :them AND expires_at = :exp AND beat`` of
    `memlife/state/lease.py::DynamoLease._watch`: while a taker watches an expired lease,
    its holder gives it back and a third worker takes it. The taker must not overwrite the
    third worker's fresh lease (it looks again and is refused), nor a lease whose holder
    renewed it in place of a beat (a lease item written before beats were counted)."""
    clock = _Clock(monkeypatch, 1_000_000.0)
    DynamoLease(aws, STORE, "old-host:1:a", ttl_s=60).acquire("run-old")
    clock.now += 61
    third = DynamoLease(aws, STORE, "third-host:1:x", ttl_s=60)

    def hand_over() -> None:
        DynamoLease(aws, STORE, "old-host:1:a", ttl_s=60).release()
        third.acquire("run-third")

    clock.meanwhile.append(hand_over)
    with pytest.raises(LeaseHeld, match="third-host"):
        DynamoLease(aws, STORE, OTHER, ttl_s=60).acquire("run-taker")
    clock.meanwhile.clear()
    item = _lease_item(aws)
    assert item is not None and item["run_id"]["S"] == "run-third"
    aws.ddb.update_item(  # a lease as an earlier memlife wrote it: no beat, no ttl_s
        TableName=aws.table,
        Key={"pk": item["pk"], "sk": item["sk"]},
        UpdateExpression="REMOVE beat, ttl_s",
    )
    clock.now += 61

    def renew_without_beat() -> None:
        aws.ddb.update_item(
            TableName=aws.table,
            Key={"pk": item["pk"], "sk": item["sk"]},
            UpdateExpression="SET expires_at = :e",
            ExpressionAttributeValues={":e": {"N": str(int(clock.now + 60))}},
        )

    clock.meanwhile.append(renew_without_beat)
    with pytest.raises(LeaseHeld, match="third-host"):
        DynamoLease(aws, STORE, OTHER, ttl_s=60).acquire("run-taker")


def test_a_lease_taken_through_memlife_lease_expires_after_the_configured_ttl(
    aws: DynamoState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``ttl_s=max(1, int(span.total_seconds()))`` in `memlife/lease.py::
    DynamoBackend._lease`: the lease a run takes on a remote store lasts
    MEMLIFE_LEASE_TTL_SECONDS (here 60 s) on the state table, so a killed worker's store is
    taken over by the next run once that has passed, not after some fixed default."""
    clock = _Clock(monkeypatch, 1_000_000.0)
    killed = lease_mod.for_store(_AgentCoreStore(), "run-killed", "nightly")
    killed._stop.set()  # killed: it renews no more (and is not released: it is gone)
    try:
        item = _lease_item(aws)
        assert item is not None and int(item["expires_at"]["N"]) == 1_000_060
        clock.now += 61
        took = DynamoLease(aws, STORE, OTHER, ttl_s=60).acquire("run-next", "nightly")
        assert took is not None and took["run_id"] == "run-killed"
    finally:
        killed.release()  # not ours any more: a no-op
    held = _lease_item(aws)
    assert held is not None and held["holder"]["S"] == OTHER


# -- 5. an erasure racing another worker's nightly run on the same store -------------------
def test_an_erasure_is_refused_before_any_write_while_another_workers_run_holds_the_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``with lease_for_store(store, "erase", "manual:erase")`` in `memlife/erase.py::
    erase` (taken before the first selection). An AgentCore store, its state in DynamoDB:
    a nightly run on another worker holds the lease when an erasure is started here. The
    erasure must be refused (LeaseHeld naming the nightly) with nothing written: the
    record, the tombstones and the journal as they were. Once the nightly has released the
    lease, the same erasure goes through."""
    from memlife import tombstones
    from memlife.erase import erase
    from memlife.journal import open_journal
    from memlife.model import MemoryRecord, MemoryType
    from memlife.stores import store_identity
    from tests.fakes.agentcore import AgentCoreHarness
    from tests.support.aws_state import CREDENTIALS, provision, state_url
    from tests.support.lifecycle import ANCHOR

    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("MEMLIFE_LEASE_TTL_SECONDS", "60")
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    harness = AgentCoreHarness()
    try:
        store = harness.store()
        surl = state_url("state-39h-erase")
        state = provision(surl)  # under the harness' moto
        monkeypatch.setenv("MEMLIFE_STATE", surl)
        monkeypatch.setattr(state_mod, "_open", {surl: state})
        store.put_many([MemoryRecord(id="m-x", actor_id="u-1", namespace="/users/u-1/facts",
                                     subject="health", memory_type=MemoryType.semantic,
                                     content="Was treated for depression in 2025.",
                                     created_at=ANCHOR)])  # fmt: skip
        identity = store_identity(store.url)
        state.check_store(identity, claim=True)  # the nightly's worker bound the table
        nightly = DynamoLease(state, identity, OTHER, ttl_s=60)
        nightly.acquire("run-nightly", "nightly")
        receipts = f"file://{tmp_path / 'receipts'}"
        with pytest.raises(lease_mod.LeaseHeld, match="run-nightly"):
            erase(store, "u-1", ids=["m-x"], receipts=receipts)
        assert store.get("m-x") is not None
        assert tombstones.listing(store, "u-1") == []
        assert open_journal(store).for_record("m-x") == []
        assert not (tmp_path / "receipts").exists() or not any((tmp_path / "receipts").rglob("*"))
        nightly.release()
        out = erase(store, "u-1", ids=["m-x"], receipts=receipts)
        assert out["erased"] == ["m-x"] and store.get("m-x") is None
    finally:
        harness.close()


# -- 6. the SQLite journal (an AgentCore store without MEMLIFE_STATE, or a SQLite store) --
def test_a_stale_sqlite_journal_writer_cannot_move_an_operation_another_receipted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks the unconditional ``UPDATE operations ... WHERE operation_id=?`` of
    `memlife/journal/sqlite.py::SqliteJournal.transition` (DynamoJournal's counterpart is
    conditional on ``#st = :from AND #at = :n``). Two processes on one journal file: the
    stale one read the operation PLANNED; meanwhile the other applied and receipted it.
    The stale writer's PLANNED -> APPLIED must be refused (JournalStateError) and the
    operation stay RECEIPTED, as it is on DynamoDB."""
    stale = SqliteJournal.at(tmp_path / "journal.db")
    other = SqliteJournal.at(tmp_path / "journal.db")  # another connection: another process
    (a,) = stale.plan([_op("m-3")])

    def apply_and_receipt(j: Any) -> None:
        j.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
        j.transition(a.operation_id, OpState.RECEIPTED)

    _racing(monkeypatch, stale, other, apply_and_receipt)
    moved: BaseException | None = None
    try:
        stale.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    except JournalStateError as exc:
        moved = exc
    now = other.get(a.operation_id)
    assert now is not None and now.state is OpState.RECEIPTED, f"moved back to {now and now.state}"
    assert isinstance(moved, JournalStateError)


def test_a_sqlite_lease_taken_again_by_its_holder_names_no_takeover(tmp_path: Path) -> None:
    """Attacks ``holder["owner"] != owner`` in `memlife/journal/sqlite.py::SqliteJournal.
    lease_acquire` (the SQLite side of 37d's DynamoDB test): a holder taking its own lease
    again (a resumed holder, expired or not) took over nobody, so its run receipt must not
    name itself as a run it replaced; another's expired lease is named."""
    from datetime import timedelta

    from memlife.model import utcnow

    journal = SqliteJournal.at(tmp_path / "journal.db")
    now = utcnow()
    assert journal.lease_acquire("lifecycle", "me:1:a", "run-1", "nightly", now, now) == (
        True,
        None,
    )
    later = now + timedelta(seconds=5)  # expired, still ours
    ok, old = journal.lease_acquire("lifecycle", "me:1:a", "run-1", "nightly", later, later)
    assert ok and old is None
    ok, old = journal.lease_acquire(
        "lifecycle", OTHER, "run-2", "nightly", later + timedelta(seconds=1), later
    )
    assert ok and old is not None and (old["owner"], old["run_id"]) == ("me:1:a", "run-1")


def test_two_workers_claiming_one_state_table_for_two_stores_at_once_bind_one(
    aws: DynamoState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``ConditionExpression="attribute_not_exists(pk)"`` of the claim in
    `memlife/state/dynamodb.py::DynamoState.check_store`. Two runs start at once on two
    stores given one state table; both read it unbound, then both claim it. Only the first
    claim binds; the second writer must learn who bound it and be refused, or both stores
    would share one journal, one lease key space and one set of tombstones."""
    from memlife.state.dynamodb import StateTableInUse

    late = DynamoState(aws.settings)  # the other worker's clients
    read = late.get

    def read_then_other_claims(k: Any) -> dict[str, Any] | None:
        seen = read(k)
        monkeypatch.setattr(late, "get", read)
        aws.check_store("agentcore://mem-a@us-east-1", claim=True)  # the first worker
        return seen

    monkeypatch.setattr(late, "get", read_then_other_claims)
    with pytest.raises(StateTableInUse, match="serves store agentcore://mem-a@us-east-1"):
        late.check_store("agentcore://mem-b@us-east-1", claim=True)
    aws.check_store("agentcore://mem-a@us-east-1")  # still its own


def test_a_writer_refused_while_the_holder_releases_gets_the_lease_or_a_clean_refusal(
    aws: DynamoState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks `memlife/state/lease.py::DynamoLease._refuse` (it reads the holder after the
    conditional put failed) with `memlife/lease.py::LeaseHeld` (it names the holder's run).
    Two runs at once: the second's put is refused by the first's lease, and the first
    releases before the second reads who holds it (the read finds no item). The second
    must then take the now free lease, or at least be refused as documented (LeaseHeld,
    exit 4), not crash."""
    holder = DynamoLease(aws, STORE, OTHER, ttl_s=60)
    holder.acquire("run-first", "nightly")
    read = aws.get

    def first_releases_then_read(k: Any) -> dict[str, Any] | None:
        monkeypatch.setattr(aws, "get", read)
        holder.release()  # the first run ends between the refused put and this read
        return read(k)

    monkeypatch.setattr(aws, "get", first_releases_then_read)
    try:
        lease = lease_mod.acquire(lease_mod.DynamoBackend(aws, STORE), "run-second", "nightly")
    except lease_mod.LeaseHeld as refused:
        assert "run-first" in str(refused) or "?" in str(refused)
    else:
        lease.release()


# -- 7. which runs take the lease ----------------------------------------------------------
def test_a_retry_run_takes_the_lease_and_is_refused_while_a_nightly_holds_it(
    aws: DynamoState,
) -> None:
    """Attacks ``if config.dry_run: return None`` in `memlife/run_start.py::take_lease`
    (mutant: ``dry_run or retry_only``). A retry run (``memlife run --retry``) drains the
    retry queue: it applies operations, so it is a writer and must take the store's lease.
    Started by hand while a scheduled nightly on another worker holds it, it is refused
    (exit 4); only a dry run takes none."""
    from memlife.run_start import take_lease
    from memlife.run_types import RunConfig

    store: Any = _AgentCoreStore()  # what take_lease asks of a MemoryStore
    DynamoLease(aws, STORE, OTHER, ttl_s=60).acquire("run-nightly", "nightly")
    assert take_lease(RunConfig(dry_run=True), store) is None
    with pytest.raises(lease_mod.LeaseHeld, match="run-nightly") as refused:
        take_lease(RunConfig(dry_run=False, retry_only=True), store)
    assert refused.value.exit_code == 4
    item = _lease_item(aws)
    assert item is not None and item["holder"]["S"] == OTHER


def test_a_lease_holds_every_level_taken_and_no_level_given_back(tmp_path: Path) -> None:
    """Attacks ``self.depth >= depth`` in `memlife/lease.py::Lease.holds` (mutant: ``>``).
    quarantine._alive asks it whether a manual run of this process is still under way: a
    hold release (level 1) running an erasure inside its lease (level 2) is alive at both
    levels, and the erasure's seal_abandoned must not take the hold release for a dead run.
    A level given back is no longer held; nothing is once the lease is released."""
    from memlife.stores.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "s.db")
    journal = SqliteJournal(store.connection)  # the store's own file holds its lease
    outer = lease_mod.acquire(journal, "run-hold-release", "manual:hold_release")
    try:
        assert outer.holds(1) and not outer.holds(2)
        inner = lease_mod.acquire(journal, "run-erase", "manual:erase")
        assert inner is outer and outer.holds(1) and outer.holds(2)
        inner.release()
        assert outer.holds(1) and not outer.holds(2)
    finally:
        outer.release()
    assert not outer.holds(1)
    store.close()


def test_a_takeovers_watch_holds_no_lock_other_threads_fences_need(
    aws: DynamoState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks the lock order of `memlife/lease.py::acquire` (session 40): a takeover of a
    DynamoDB lease that looks expired watches its beat for half a TTL (a minute by default).
    Taken under the process's ``_HELD_LOCK``, every other thread's fence check and release
    (check_held, Lease.release) would wait out that minute mid-run. The watch must run with
    that lock free."""
    clock = _Clock(monkeypatch, 1_000_000.0)
    DynamoLease(aws, STORE, OTHER, ttl_s=60).acquire("run-dead", "nightly")
    clock.now += 61
    free: list[bool] = []

    def others_fence_can_run() -> None:
        got = lease_mod._HELD_LOCK.acquire(blocking=False)
        free.append(got)
        if got:
            lease_mod._HELD_LOCK.release()

    clock.meanwhile.append(others_fence_can_run)
    lease = lease_mod.for_store(_AgentCoreStore(), "run-next", "nightly")
    try:
        assert lease.taken_over is not None and lease.taken_over["run_id"] == "run-dead"
        assert free == [True]
    finally:
        lease.release()
