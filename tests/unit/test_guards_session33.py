"""Guards a mutation audit found unattacked (session 33): each test holds one guarantee that
a named guard in memlife/ alone keeps, and fails when that guard is removed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.apply import DeleteItem, Executor, Tally
from memlife.apply.group_resume import resume_group
from memlife.apply.lifecycle import run_lifecycle
from memlife.audit import FileSink
from memlife.consolidate.base import Group
from memlife.journal import (
    Journal,
    JournalStateError,
    Operation,
    OpKind,
    OpState,
    Outcome,
    SqliteJournal,
    open_journal,
)
from memlife.model import MemoryRecord, RetentionClass, Status, content_sha256
from memlife.policy import load_policy
from memlife.receipts import operation_key
from memlife.stores.base import BatchResult, ItemFailure, MemoryStore
from memlife.stores.sqlite import SqliteStore

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)
POLICY = load_policy("policies/default.yaml")
NS = "/users/u-1/facts"
Env = tuple[MemoryStore, Journal, FileSink]
SqliteEnv = tuple[SqliteStore, Journal, FileSink]


def rec(rid: str, content: str = "Likes tea.", **kw: Any) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic", content=content,
                created_at=T0 - timedelta(days=40), subject="drinks", owner="team")  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


def held(r: MemoryRecord) -> MemoryRecord:
    return r.model_copy(update={"retention_class": RetentionClass.legal_hold})


def executor(store: MemoryStore, journal: Journal, sink: FileSink, key: str = "run-a") -> Executor:
    return Executor(run_id=f"run-{key}", run_key=key, policy=POLICY, cutoff=T0, store=store,
                    journal=journal, sink=sink)  # fmt: skip


def state_of(journal: Journal, operation_id: str) -> OpState | None:
    op = journal.get(operation_id)
    return None if op is None else op.state


def delete_op(ex: Executor, r: MemoryRecord) -> Operation:
    (op,) = ex.journal.plan(
        [ex.new_op(OpKind.delete, r.actor_id, r.namespace, r.id, ["HARD_EXPIRED"], r.sha256)]
    )
    return op


def supersede_op(ex: Executor, r: MemoryRecord, by: str) -> Operation:
    (op,) = ex.journal.plan([ex.new_op(OpKind.supersede, r.actor_id, r.namespace, r.id,
                                       ["SAME_SUBJECT"], r.sha256, replacement=by)])  # fmt: skip
    return op


def write_op(ex: Executor, r: MemoryRecord) -> Operation:
    (op,) = ex.journal.plan([ex.new_op(OpKind.write_replacement, r.actor_id, r.namespace, r.id,
                                       ["CONSOLIDATION"], content_sha256(r.content),
                                       payload=r.to_json())])  # fmt: skip
    return op


@pytest.fixture()
def sqlite_env(home: Path) -> Iterator[tuple[SqliteStore, Journal, FileSink]]:
    store = SqliteStore(home / "memlife.db")
    yield store, open_journal(store), FileSink(home / "receipts")
    store.close()


@pytest.fixture(scope="module")
def harness() -> Iterator[Any]:
    from tests.fakes.agentcore import AgentCoreHarness

    h = AgentCoreHarness()
    yield h
    h.close()


@pytest.fixture(params=["sqlite", "agentcore"])
def any_env(
    request: pytest.FixtureRequest, home: Path
) -> Iterator[tuple[MemoryStore, Journal, FileSink]]:
    """The embedded store (it refuses held writes itself) and AgentCore (no hold check in
    its writes: the appliers' re-read is the only guard)."""
    sink = FileSink(home / "receipts")
    if request.param == "sqlite":
        store = SqliteStore(home / "memlife.db")
        yield store, open_journal(store), sink
        store.close()
        return
    ac = request.getfixturevalue("harness").store()
    yield ac, SqliteJournal.at(home / "journal.db"), sink


# -- 1. consolidate/base.py Group.__post_init__: the namespace is part of the tenant ---------
def test_a_group_of_one_actor_spanning_two_namespaces_is_refused() -> None:
    """Attacks the tenant check comparing (actor, namespace), not the actor alone."""
    a = rec("m-a")
    b = rec("m-b", "Likes green tea.", namespace="/users/u-1/work")
    with pytest.raises(ValueError, match="tenants never mix"):
        Group(key="k", actor_id="u-1", namespace=NS, subject="drinks", records=[a, b])


# -- 2. appliers/base.py stale(): a hold placed after planning wins --------------------------
def test_a_hold_placed_after_planning_stops_the_delete(any_env: Env) -> None:
    """Attacks stale()'s hold check: on AgentCore nothing else refuses a held delete."""
    store, journal, sink = any_env
    r = rec("m-exp", expires_at=T0 - timedelta(days=1))
    store.put_many([r])
    ex = executor(store, journal, sink)
    op = delete_op(ex, r)
    store.put_many([held(r)])  # the hold lands between planning and applying
    (done,) = run_lifecycle(ex, [op], Tally())
    assert store.get("m-exp") == held(r)
    assert (done.state, done.last_error, done.next_retry_at) == (OpState.FAILED, "LEGAL_HOLD", None)


def test_a_hold_placed_after_planning_stops_the_supersede(any_env: Env) -> None:
    """Attacks stale()'s hold check for status changes (AgentCore's set_status has none)."""
    store, journal, sink = any_env
    a, r = rec("m-a"), rec("m-r", "Likes green tea.")
    store.put_many([a, r])
    ex = executor(store, journal, sink)
    op = supersede_op(ex, a, by="m-r")
    store.put_many([held(a)])
    (done,) = run_lifecycle(ex, [op], Tally())
    assert store.get("m-a") == held(a)
    assert (done.state, done.last_error, done.next_retry_at) == (OpState.FAILED, "LEGAL_HOLD", None)


# -- 3. appliers/write.py: a held record under the replacement's id is never rewritten ----
def test_a_replacement_write_never_overwrites_a_held_record_of_its_id(any_env: Env) -> None:
    """Attacks the write applier's hold check (neither store refuses the upsert itself)."""
    store, journal, sink = any_env
    replacement = rec("m-r", "Likes green tea.", provenance={"supersedes": ["m-a"]})
    ex = executor(store, journal, sink)
    op = write_op(ex, replacement)
    other = held(rec("m-r", "Moved to Lisbon in May."))  # the id, held, with other content
    store.put_many([other])
    (done,) = run_lifecycle(ex, [op], Tally())
    assert store.get("m-r") == other
    assert (done.state, done.last_error) == (OpState.FAILED, "LEGAL_HOLD")


# -- 4. lifecycle.py retryable(): a terminal failure is never replayed -------------------
def test_a_delete_refused_for_a_hold_is_not_replayed_by_its_own_rerun(
    sqlite_env: SqliteEnv,
) -> None:
    """Attacks retryable() requiring next_retry_at: the same run key plans the same
    operation again and finds it FAILED for good, even once the hold is released."""
    store, journal, sink = sqlite_env
    r = rec("m-exp", expires_at=T0 - timedelta(days=1))
    store.put_many([held(r)])
    item = DeleteItem(r.id, r.actor_id, r.namespace, ("HARD_EXPIRED",), r.sha256)
    executor(store, journal, sink).delete([item], Tally())
    (op,) = journal.for_record("m-exp")
    assert (op.state, op.last_error, op.next_retry_at) == (OpState.FAILED, "LEGAL_HOLD", None)
    store.put_many([r])  # the hold is released (the record as it was planned)
    rerun = Tally()
    executor(store, journal, sink).delete([item], rerun)  # same run key: same operation
    assert store.get("m-exp") == r, "a terminal LEGAL_HOLD failure was replayed"
    assert rerun.counts["deleted"] == 0 and state_of(journal, op.operation_id) is OpState.FAILED


# -- 5. journal/base.py ALLOWED: APPLIED only moves on to RECEIPTED -----------------------
@pytest.fixture(params=["sqlite", "dynamodb"])
def any_journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Journal]:
    if request.param == "sqlite":
        yield SqliteJournal.at(tmp_path / "journal.db")
        return
    from memlife.journal.dynamodb import DynamoJournal
    from tests.support.aws_state import aws_state

    with aws_state("inprocess") as (_, state):
        yield DynamoJournal(state)


@pytest.mark.parametrize("to", [OpState.APPLIED, OpState.FAILED, OpState.PLANNED])
def test_an_applied_operation_moves_only_to_receipted(any_journal: Journal, to: OpState) -> None:
    """Attacks the state machine's APPLIED row: applied twice would count and receipt twice."""
    from memlife.journal import operation_id

    run = f"run-{to.value}"  # a fresh operation per case (DynamoDB's table may be shared)
    op = Operation(operation_id=operation_id(run, OpKind.delete, ["m-1"]), run_id=run,
                   kind=OpKind.delete, actor_id="u-1", namespace=NS, record_id="m-1",
                   reasons=["HARD_EXPIRED"], policy_version="p1")  # fmt: skip
    any_journal.plan([op])
    any_journal.transition(op.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    with pytest.raises(JournalStateError):
        any_journal.transition(op.operation_id, to, outcome=Outcome.deleted, error="X")
    assert state_of(any_journal, op.operation_id) is OpState.APPLIED
    assert any_journal.transition(op.operation_id, OpState.RECEIPTED).state is OpState.RECEIPTED


# -- 6. groups.py resume_group: never supersede before the replacement is durable ---------
class ThrottledReplacements(SqliteStore):
    """The replacement write is throttled (a retryable item failure); all else works."""

    def put_replacement(self, record: MemoryRecord) -> BatchResult:
        return BatchResult(failed=[ItemFailure(record.id, "THROTTLED", retryable=True)])


def test_supersedes_wait_while_the_replacement_write_is_retried(home: Path) -> None:
    """Attacks resume_group's 'replacement not durable: do not supersede' return."""
    store = ThrottledReplacements(home / "memlife.db")
    try:
        a, b = rec("m-a"), rec("m-b", "Likes green tea.")
        store.put_many([a, b])
        sink = FileSink(home / "receipts")
        ex = executor(store, open_journal(store), sink)
        repl = rec("m-r", "Likes green tea.", provenance={"supersedes": ["m-a", "m-b"]})
        planned = ex.journal.plan([
            ex.new_op(OpKind.write_replacement, "u-1", NS, "m-r", ["CONSOLIDATION"],
                      content_sha256(repl.content), payload=repl.to_json()),
            *(ex.new_op(OpKind.supersede, "u-1", NS, x.id, ["SAME_SUBJECT"], x.sha256,
                        replacement="m-r") for x in (a, b)),
        ])  # fmt: skip
        resume_group(ex, planned, Tally())
        ops = {o.record_id: o for o in ex.journal.by_run(ex.run_id)}
        assert ops["m-r"].state is OpState.FAILED and ops["m-r"].next_retry_at is not None
        assert [ops[i].state for i in ("m-a", "m-b")] == [OpState.PLANNED, OpState.PLANNED]
        assert all(sink.get(operation_key(ops[i].operation_id)) is None for i in ("m-a", "m-b"))
        assert [store.get(i).status for i in ("m-a", "m-b")] == [Status.active, Status.active]  # type: ignore[union-attr]
    finally:
        store.close()


# -- 7. appliers/status.py: a supersede needs another record, active, as its replacement --
@pytest.mark.parametrize(
    "case", ["chain_into_nothing", "chain_into_a_loop", "chain_into_another_tenant", "itself"]
)
def test_a_supersede_is_refused_without_an_active_other_replacement(
    sqlite_env: SqliteEnv, case: str
) -> None:
    """Attacks invariant 3's check in set_status: a replacement superseded down a chain
    that ends nowhere (a record gone, a loop), or the record itself."""
    store, journal, sink = sqlite_env
    a = rec("m-a")
    ends = {"chain_into_a_loop": "m-y", "chain_into_another_tenant": "m-x"}.get(case, "m-z")
    gone = rec("m-r", "Likes green tea.", status=Status.superseded,
               provenance={"replaced_by": ends})  # fmt: skip
    loop = rec("m-y", "Likes tea.", status=Status.superseded, provenance={"replaced_by": "m-r"})
    other = rec("m-x", "Likes green tea, mostly.", actor_id="u-2")
    store.put_many([a, gone, loop, other])
    ex = executor(store, journal, sink)
    op = supersede_op(ex, a, by="m-a" if case == "itself" else "m-r")
    (done,) = run_lifecycle(ex, [op], Tally())
    assert (done.state, done.last_error) == (OpState.FAILED, "REPLACEMENT_MISSING")
    assert store.get("m-a") == a


def test_a_supersede_follows_a_replacement_superseded_since_down_its_chain(
    sqlite_env: SqliteEnv,
) -> None:
    """The replacement was superseded online since the plan (by m-z, another record of the
    tenant): the source goes down the chain to m-z, where a hand-over would have moved it
    had the supersede come first (session 43)."""
    store, journal, sink = sqlite_env
    a = rec("m-a")
    gone = rec("m-r", "Likes green tea.", status=Status.superseded,
               provenance={"replaced_by": "m-z"})  # fmt: skip
    store.put_many([a, gone, rec("m-z", "Likes green tea, mostly.")])
    ex = executor(store, journal, sink)
    (done,) = run_lifecycle(ex, [supersede_op(ex, a, by="m-r")], Tally())
    assert done.state is OpState.RECEIPTED, (done.state, done.last_error)
    now = store.get("m-a")
    assert now is not None and (now.status, now.provenance.replaced_by) == (
        Status.superseded,
        "m-z",
    )


# -- 8. lifecycle.py: the fence before a batch of changes ---------------------------------
def test_a_writer_whose_lease_was_taken_over_deletes_nothing(sqlite_env: SqliteEnv) -> None:
    """Attacks run_lifecycle's ex.fence(): a paused writer must not write after a takeover."""
    from memlife.lease import LeaseLost, acquire

    store, journal, sink = sqlite_env
    r = rec("m-exp", expires_at=T0 - timedelta(days=1))
    store.put_many([r])
    lease = acquire(journal, "run-paused", "test")  # type: ignore[arg-type]
    try:
        ex = executor(store, journal, sink)
        op = delete_op(ex, r)
        # the pause: the lease expired and another writer took it over
        store.connection.execute("UPDATE leases SET owner='elsewhere:2:y', run_id='run-other', "
                                 "expires_at='2999-01-01T00:00:00+00:00'")  # fmt: skip
        lease._confirmed -= lease.ttl.total_seconds()
        with pytest.raises(LeaseLost):
            run_lifecycle(ex, [op], Tally())
    finally:
        lease.release()
    assert store.get("m-exp") == r
    assert state_of(journal, op.operation_id) is OpState.PLANNED


# -- 9. erase.py compact(): a cache file beside the store is compacted too -----------------
MARKER = "zq-marker-7f3a91c2"


def test_an_erasure_leaves_no_byte_of_the_erased_text_in_the_home_cache_file(
    sqlite_env: SqliteEnv, home: Path
) -> None:
    """Attacks compact() vacuuming caches other than the store's: a kept model answer of
    the erased record's shard, deleted with secure_delete, still sat in the WAL's frames
    while another connection (a live process) kept the file open."""
    from memlife.consolidate.answers import answer_book
    from memlife.embed_cache import EmbeddingCache
    from memlife.erase import erase

    store, _, sink = sqlite_env
    store.put_many([rec("m-x", f"Likes tea {MARKER}."), rec("m-y", "Likes dogs.", subject="pets")])
    cache = EmbeddingCache(path=home / "embeddings.db")  # the dry runs' file, open elsewhere
    try:
        book = answer_book(cache, dry_run=True)
        assert book is not None
        book.keep("d" * 64, ("u-1", NS), "model", {"statement": f"Likes tea {MARKER}."})
        files = [home / "embeddings.db", home / "embeddings.db-wal"]

        def hits() -> list[str]:
            return [f.name for f in files if f.exists() and MARKER.encode() in f.read_bytes()]

        assert hits(), "the kept answer is on disk before the erasure"
        out = erase(store, "u-1", ids=["m-x"], policy=POLICY, receipts=sink, now=T0)
        assert out["erased"] == ["m-x"]
        assert hits() == []
    finally:
        cache.close()


# -- 10. audit.py FileSink.put_new: create-only ---------------------------------------------
def test_a_file_receipt_is_written_once_and_never_replaced(tmp_path: Path) -> None:
    """Attacks FileSink.put_new's create-only check."""
    sink = FileSink(tmp_path / "receipts")
    key = operation_key("op-0001")
    assert sink.put_new(key, b"a") is True
    assert sink.put_new(key, b"b") is False
    assert sink.get(key) == b"a"
