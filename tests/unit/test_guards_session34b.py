"""Guards a mutation audit found unattacked (session 34, round b: the operations engine and
"two runs never share a store"): the lease's fence and its release, the journal's state
machine and retry queue, the resume of a consolidation group, the retry backoff, the run
chain and the sealing of abandoned runs. Each test holds one guarantee that a named guard
in memlife/ alone keeps, and fails when that guard is removed or loosened. Real
components: the SQLite store and its journal, the lease over it, the file sink; faults
only at boundaries (a process's signal answer, the monotonic clock)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import memlife.lease as lease_mod
from memlife.apply import Executor, Tally
from memlife.audit import FileSink
from memlife.errors import StoreError
from memlife.journal import (
    Journal,
    JournalStateError,
    Operation,
    OpKind,
    OpState,
    Outcome,
    SqliteJournal,
    open_journal,
    operation_id,
)
from memlife.lease import LeaseHeld, LeaseLost, acquire, scoped
from memlife.model import MemoryRecord, utcnow
from memlife.policy import load_policy
from memlife.stores.base import MAX_BATCH, BatchResult, ItemFailure
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_guards_session33 import any_journal  # noqa: F401 (its fixture: SQLite and DynamoDB)

OTHER = "elsewhere:2:y"  # another host's writer
T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)
NS = "/users/u-1/facts"
POLICY = load_policy("policies/default.yaml")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "memlife.db")
    yield s
    s.close()


def rec(rid: str, content: str = "Likes tea.", **kw: object) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic", content=content,
                created_at=T0 - timedelta(days=40), subject="drinks", owner="team")  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


def executor(store: SqliteStore, journal: Journal, sink: FileSink, key: str) -> Executor:
    return Executor(run_id=key, run_key=key, policy=POLICY, cutoff=T0, store=store,
                    journal=journal, sink=sink)  # fmt: skip


def journal_op(
    rid: str, kind: OpKind = OpKind.delete, run: str = "run-1", **kw: object
) -> Operation:
    return Operation(operation_id=operation_id(run, kind, [rid]), run_id=run, kind=kind,
                     actor_id="u-1", namespace=NS, record_id=rid, reasons=["HARD_EXPIRED"],
                     policy_version="p1", **kw)  # type: ignore[arg-type]  # fmt: skip


def lease_row(store: SqliteStore) -> tuple[str, str] | None:
    row = store.connection.execute("SELECT owner, run_id FROM leases").fetchone()
    return None if row is None else (row[0], row[1])


def take_over(store: SqliteStore) -> None:
    """Another writer took the lease over (its row, its owner, a live expiry)."""
    store.connection.execute(
        "UPDATE leases SET owner=?, run_id='run-other', expires_at='2999-01-01T00:00:00+00:00'",
        (OTHER,),
    )


def other_writer_starts(journal: SqliteJournal) -> bool:
    """Whether another process's writer would get the lease now (its own acquire)."""
    now = utcnow()
    ok, _ = journal.lease_acquire(lease_mod.NAME, OTHER, "run-x", "nightly", now,
                                  now + timedelta(minutes=2))  # fmt: skip
    if ok:
        journal.lease_release(lease_mod.NAME, OTHER)
    return ok


# -- 1. journal/sqlite.py lease_release: only the holder's own row is deleted ---------------
def test_a_writer_whose_lease_was_taken_over_does_not_free_the_new_holders_lease(
    store: SqliteStore,
) -> None:
    """Attacks ``AND owner=?`` in lease_release: a writer paused past its TTL, whose lease
    another writer took over, gives its lease back when it stops. That must not delete the
    new holder's row: a third writer would then start beside the second (invariant 9)."""
    journal = open_journal(store)
    lease = acquire(journal, "run-paused", "test")
    take_over(store)
    lease.release()
    assert lease_row(store) == (OTHER, "run-other")
    with pytest.raises(LeaseHeld, match="run-other"):
        acquire(journal, "run-third", "test")


# -- 2. lease.py scoped(): only the leases taken inside are given back ----------------------
def test_a_scoped_call_inside_a_held_lease_leaves_the_outer_lease_held(
    store: SqliteStore,
) -> None:
    """Attacks ``lease.depth > before.get(k, 0)`` in scoped: hold release holds the lease
    and runs an erasure (``@lease_scoped``) inside it. When the erasure returns, only its own
    re-entrant hold is given back; the outer writer still holds the lease, so another
    writer is refused until the outer one releases."""
    journal = open_journal(store)
    outer = acquire(journal, "run-hold-release", "test")

    @scoped
    def erase_inside() -> int:
        return acquire(journal, "run-erase", "test").depth

    try:
        assert erase_inside() == 2
        assert outer.depth == 1 and lease_row(store) == (lease_mod.OWNER, "run-hold-release")
        assert not other_writer_starts(journal)
    finally:
        outer.release()
    assert lease_row(store) is None and other_writer_starts(journal)


# -- 3-5. lease.py Lease.check / _beat: the fence before a write ----------------------------
@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A monotonic clock the test moves (a pause is a jump); a short real TTL (0.6 s)."""
    monkeypatch.setenv("MEMLIFE_LEASE_TTL_SECONDS", "0.6")
    clock = [1000.0]
    monkeypatch.setattr(lease_mod.time, "monotonic", lambda: clock[0])
    return clock


def test_a_confirmation_older_than_a_third_of_the_ttl_is_renewed_before_a_write(
    store: SqliteStore, frozen: list[float]
) -> None:
    """Attacks ``< ttl / 3`` in Lease.check: a renewal stands only for the heartbeat's own
    pace. Half a TTL after it (a pause; another host, its clock ahead, took the lease over)
    the fence asks again and finds the lease taken: the writer stops (invariant 9)."""
    lease = acquire(open_journal(store), "run-paused", "test")
    try:
        lease._stop.set()  # no heartbeat: the fence alone
        lease._confirmed = frozen[0]
        lease.check()  # just confirmed: stands without asking
        frozen[0] += lease.ttl.total_seconds() / 2
        take_over(store)
        with pytest.raises(LeaseLost, match="run-paused"):
            lease.check()
    finally:
        lease.release()


def test_a_lease_the_heartbeat_found_lost_stops_the_next_write_at_once(
    store: SqliteStore, frozen: list[float]
) -> None:
    """Attacks ``not self.lost`` in Lease.check's fast path: the heartbeat found another
    owner in the lease row. However recent the last confirmation, the writer must not write
    again: lost is sticky (invariant 9)."""
    lease = acquire(open_journal(store), "run-paused", "test")
    lease._confirmed = frozen[0]  # confirmed now, by the clock the test moves
    try:
        take_over(store)
        lease._thread.join(timeout=10)  # the real heartbeat: its renewal fails, it stops
        assert lease.lost
        assert frozen[0] - lease._confirmed < lease.ttl.total_seconds() / 3  # "fresh"
        with pytest.raises(LeaseLost):
            lease.check()
    finally:
        lease.release()


def test_a_heartbeat_renewal_is_as_old_as_its_asking(
    store: SqliteStore, frozen: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``self._confirmed = asked`` in Lease._beat: the heartbeat's renewal was
    answered only after a pause past the TTL, during which another writer took the lease.
    The confirmation dates from the asking, so the next write's fence asks again and stops;
    dated from the answer it would look fresh and the writer would write beside the other."""
    journal = open_journal(store)
    renew = journal.lease_renew
    held: list[lease_mod.Lease] = []

    def renew_then_pause(*args: object, **kw: object) -> bool:
        ok = renew(*args, **kw)  # type: ignore[arg-type]
        frozen[0] += 2 * held[0].ttl.total_seconds()  # paused after the answer
        take_over(store)
        held[0]._stop.set()  # one beat is enough
        return ok

    monkeypatch.setattr(journal, "lease_renew", renew_then_pause)
    held.append(acquire(journal, "run-paused", "test"))
    lease = held[0]
    try:
        lease._thread.join(timeout=10)
        assert not lease.lost  # the beat's renewal itself held
        monkeypatch.setattr(journal, "lease_renew", renew)
        with pytest.raises(LeaseLost):
            lease.check()
    finally:
        lease.release()


# -- 6. lease.py dead_here: a pid that exists but is not ours to signal is alive ------------
def test_a_holder_whose_pid_cannot_be_signalled_is_not_taken_over(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``except OSError: return False`` in dead_here: the holder's pid exists on
    this host but belongs to another user (EPERM, e.g. a writer run under another account).
    It is alive: its lease is refused until it expires, never taken over at once."""
    holder_pid = 4_000_000  # the boundary answers for it: exists, another user's
    real_kill = lease_mod.os.kill

    def kill(pid: int, sig: int) -> None:
        if pid == holder_pid:
            raise PermissionError(1, "Operation not permitted")
        real_kill(pid, sig)

    monkeypatch.setattr(lease_mod.os, "kill", kill)
    owner = f"{lease_mod.HOST_ID}:{holder_pid}:x"
    assert not lease_mod.dead_here(owner)
    journal = open_journal(store)
    store.connection.execute(
        "INSERT INTO leases VALUES ('lifecycle', ?, 'run-other', 'nightly', "
        "'2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00', "
        "'2999-01-01T00:00:00+00:00')", (owner,),
    )  # fmt: skip
    with pytest.raises(LeaseHeld, match="run-other"):
        acquire(journal, "run-4", "test")
    assert lease_row(store) == (owner, "run-other")


# -- 7. journal/sqlite.py resolve: an operator decides terminal failures only ---------------
@pytest.mark.parametrize("state", [OpState.PLANNED, OpState.APPLIED, OpState.RECEIPTED])
def test_an_operator_cannot_resolve_an_operation_that_did_not_fail(
    tmp_path: Path, state: OpState
) -> None:
    """Attacks ``op.state is not OpState.FAILED`` in resolve: an operation still under way or
    done has no next retry either, but it is no terminal failure. ``ops resolve --decision
    dismiss`` on it would put "dismissed" on the record of a change that runs (or ran) all
    the same; it is refused and the operation is left as it was."""
    journal = SqliteJournal.at(tmp_path / "journal.db")
    (op,) = journal.plan([journal_op("m-1")])
    if state is not OpState.PLANNED:
        journal.transition(op.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    if state is OpState.RECEIPTED:
        journal.transition(op.operation_id, OpState.RECEIPTED)
    before = journal.get(op.operation_id)
    for decision, retry_at in (("dismissed", None), ("requeued", T0)):
        with pytest.raises(JournalStateError, match="not a terminal failure"):
            journal.resolve(op.operation_id, decision, at=T0, retry_at=retry_at)
    after = journal.get(op.operation_id)
    assert after == before and after.resolution is None and after.next_retry_at is None


# -- 8. journal/base.py ALLOWED: a failed operation is never receipted as done --------------
@pytest.mark.parametrize("retry", [False, True], ids=["terminal", "retryable"])
def test_a_failed_operation_cannot_be_receipted_as_if_it_succeeded(
    any_journal: Journal,  # noqa: F811 (the imported fixture)
    retry: bool,
) -> None:
    """Attacks the FAILED row of ALLOWED: FAILED moves on only by a new attempt (APPLIED or
    FAILED again). Straight to RECEIPTED, a failed delete would read as done (its receipt
    claiming a change that did not happen, invariant 2) and drop out of the operator's list
    or the retry queue for good (invariant 10)."""
    run = f"run-{'retry' if retry else 'terminal'}"  # DynamoDB's table may be shared
    (op,) = any_journal.plan([journal_op("m-1", run=run)])
    any_journal.transition(op.operation_id, OpState.FAILED, outcome=Outcome.failed,
                           error="THROTTLED" if retry else "VALIDATION",
                           next_retry_at=T0 if retry else None)  # fmt: skip
    with pytest.raises(JournalStateError):
        any_journal.transition(op.operation_id, OpState.RECEIPTED)
    now = any_journal.get(op.operation_id)
    assert now is not None and (now.state, now.outcome) == (OpState.FAILED, Outcome.failed)
    if retry:
        assert op.operation_id in {o.operation_id for o in any_journal.due(T0)}
    else:
        assert op.operation_id in {o.operation_id for o in any_journal.terminal_failures()}


# -- 9. apply/resume.py resume_due: a shard the store stopped gets no further batch ----------
class QuotaStore(SqliteStore):
    """The store refuses deletes for quota (a store-level error that stops the shard)."""

    calls = 0

    def delete_many(self, ids: Sequence[str], **kw: object) -> BatchResult:
        self.calls += 1
        raise StoreError("service quota exceeded", code="QUOTA_EXCEEDED")


def test_the_retry_queue_stops_a_shard_the_store_stopped(home: Path) -> None:
    """Attacks ``if (actor, ns) in ex.stopped: break`` in resume_due: a crashed run left 150
    deletes of one shard queued (two batches). The store stops the shard on the first
    batch (quota exceeded); the second is not sent to it this run: it stays queued, PLANNED
    and untried, for the next run, instead of hammering a stopped store and being failed."""
    store = QuotaStore(home / "memlife.db")
    try:
        records = [rec(f"m-{i:03d}", expires_at=T0 - timedelta(days=1)) for i in range(150)]
        store.put_many(records)
        journal, sink = open_journal(store), FileSink(home / "receipts")
        crashed = executor(store, journal, sink, "run-crashed")
        journal.plan([crashed.new_op(OpKind.delete, "u-1", NS, r.id, ["HARD_EXPIRED"], r.sha256)
                      for r in records])  # fmt: skip
        tally = Tally()
        executor(store, journal, sink, "run-next").resume_due(tally)
        assert store.calls == 1
        assert [s["code"] for s in tally.stopped_shards] == ["QUOTA_EXCEEDED"]
        states = Counter(o.state for o in journal.by_run(crashed.run_id))
        assert states == {OpState.FAILED: MAX_BATCH, OpState.PLANNED: 150 - MAX_BATCH}
        assert all(store.get(r.id) is not None for r in records)
    finally:
        store.close()


# -- 10. apply/retry.py next_retry: the backoff's floor, doubling and cap --------------------
@pytest.mark.parametrize("jitter", [0.0, 0.999999])
def test_a_retry_waits_between_half_and_all_of_its_doubling_delay_capped_at_a_day(
    monkeypatch: pytest.MonkeyPatch, jitter: float
) -> None:
    """Attacks the jitter's floor (``0.5 + random / 2``), the exponent (``attempts - 1``) and
    ``min(RETRY_CAP, ...)``: the n-th retry of a throttled write waits 5 min * 2**(n-1),
    at least half of it (never at once: a throttled store is not hammered), never more than
    a day (a deep backlog still comes back every night), however many attempts came before
    (from 40 on, the doubling overflowed timedelta before the cap: the bug this audit
    found, fixed by bounding the doublings)."""
    from memlife.apply import retry

    monkeypatch.setattr(retry._JITTER, "random", lambda: jitter)  # the random source's ends
    for attempts, full in ((1, timedelta(minutes=5)), (2, timedelta(minutes=10)),
                           (4, timedelta(minutes=40)), (30, timedelta(hours=24)),
                           (40, timedelta(hours=24)), (10**6, timedelta(hours=24))):  # fmt: skip
        wait = retry.next_retry(attempts, T0) - T0
        assert full / 2 <= wait <= full, (attempts, wait)


# -- 10b. retry.py: a write throttled night after night never wedges the retry queue -------
def test_a_write_throttled_for_fifty_nights_keeps_its_place_in_the_retry_queue(
    tmp_path: Path,
) -> None:
    """The bug this audit found: ``next_retry`` doubled before capping, so the 40th attempt
    of a write the store kept throttling raised OverflowError inside the retry queue, before
    the failure was journaled: every later night crashed on the same operation. Now each
    night records one more attempt and the operation stays FAILED (retryable), due again."""

    class AlwaysThrottled(SqliteStore):
        def delete_many(self, ids: Sequence[str], **kw: object) -> BatchResult:
            return BatchResult(failed=[ItemFailure(i, "THROTTLED", retryable=True) for i in ids])

    store = AlwaysThrottled(tmp_path / "memlife.db")
    try:
        r = MemoryRecord.model_validate(dict(
            id="m-1", actor_id="u-1", namespace="/users/u-1/facts", memory_type="semantic",
            content="Likes tea.", created_at=T0 - timedelta(days=40), subject="drinks",
            owner="team", expires_at=T0 - timedelta(days=1)))  # fmt: skip
        store.put_many([r])
        journal, sink = open_journal(store), FileSink(tmp_path / "receipts")

        def night(key: str, at: datetime) -> Executor:
            return Executor(run_id=key, run_key=key, policy=POLICY, cutoff=at, store=store,
                            journal=journal, sink=sink)  # fmt: skip

        first = night("night-0", T0)
        journal.plan([first.new_op(OpKind.delete, "u-1", r.namespace, "m-1",
                                   ["HARD_EXPIRED"], r.sha256)])  # fmt: skip
        for n in range(1, 51):
            night(f"night-{n}", T0 + timedelta(days=n)).resume_due(Tally())
        (op,) = journal.for_record("m-1")
        assert op.state is OpState.FAILED and op.attempts == 50
        assert op.next_retry_at is not None  # retryable: a terminal failure has none
        assert op.next_retry_at <= T0 + timedelta(days=51)  # due again tomorrow, at the latest
        assert store.get("m-1") is not None  # nothing lost: the record waits for its delete
    finally:
        store.close()


# -- 11. run_abandoned.py: a run still under way in this process is not sealed as dead -------
def test_a_run_still_open_in_this_process_is_not_sealed_as_abandoned(tmp_path: Path) -> None:
    """Attacks ``other in alive`` in seal_abandoned: an erasure inside a hold release seals
    the store's dead runs; the hold release's own manual run (manifest written, no receipt
    yet) is alive in this process. Sealing it would write a failure/ABANDONED receipt over
    a run that then finishes with its own. A dead run of the store is sealed (the control)."""
    from memlife.run_abandoned import seal_abandoned
    from memlife.stores import store_identity

    db = tmp_path / "memlife.db"
    url = f"sqlite:///{db}"
    sink = FileSink(tmp_path / "receipts")
    runs = {"outer": "20261101T100000Z-manual-0000000001",
            "dead": "20261101T090000Z-manual-0000000002"}  # fmt: skip
    for rid in runs.values():
        manifest = {"run_id": rid, "mode": "manual", "store_identity": store_identity(url),
                    "cutoff": T0.isoformat(), "started_at": T0.isoformat()}  # fmt: skip
        assert sink.put_new(f"runs/2026/11/01/{rid}/manifest.json", json.dumps(manifest).encode())
    store = SqliteStore(db)
    try:
        sealed = seal_abandoned(sink, open_journal(store), store_url=url,
                                run_id="20261101T110000Z-manual-0000000003", cutoff=T0, now=T0,
                                alive={runs["outer"]})  # fmt: skip
    finally:
        store.close()
    assert sealed == [runs["dead"]]
    assert sink.get(f"runs/2026/11/01/{runs['outer']}/receipt.json") is None


# -- 12. run_abandoned.py sealed_before: a run whose receipt was removed is not sealed again -
def test_a_run_whose_receipt_was_removed_is_not_sealed_again(tmp_path: Path) -> None:
    """Attacks the ``sealed_before`` check in seal_abandoned: a run folder with its report
    page (written after its receipt) but no receipt.json lost its receipt (a delete marker),
    it did not die unsealed. Sealing it would write a fresh failure/ABANDONED receipt over
    the gap in the evidence; it is left for ``receipts verify`` to name."""
    from memlife.run_abandoned import seal_abandoned
    from memlife.stores import store_identity

    db = tmp_path / "memlife.db"
    url = f"sqlite:///{db}"
    sink = FileSink(tmp_path / "receipts")
    rid = "20261101T100000Z-apply-0000000001"
    manifest = {"run_id": rid, "mode": "apply", "store_identity": store_identity(url),
                "cutoff": T0.isoformat(), "started_at": T0.isoformat()}  # fmt: skip
    assert sink.put_new(f"runs/2026/11/01/{rid}/manifest.json", json.dumps(manifest).encode())
    assert sink.put_new(f"runs/2026/11/01/{rid}/report.html", b"<html></html>", "text/html")
    store = SqliteStore(db)
    try:
        sealed = seal_abandoned(sink, open_journal(store), store_url=url,
                                run_id="20261101T110000Z-apply-0000000002", cutoff=T0, now=T0)  # fmt: skip
    finally:
        store.close()
    assert sealed == []
    assert sink.get(f"runs/2026/11/01/{rid}/receipt.json") is None
