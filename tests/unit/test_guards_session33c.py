"""Guards a mutation audit found unattacked (session 33, round c: import/export, quarantine,
DynamoDB state, the AgentCore adapter, run chain/scope, tombstones): each test holds one
guarantee that a named guard in memlife/ alone keeps, and fails when that guard is removed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife import tombstones
from memlife.erasure_export import load_erasures
from memlife.errors import InputError
from memlife.importer import import_file
from memlife.journal import JournalStateError, Operation, OpKind, OpState, Outcome, open_journal
from memlife.model import MemoryRecord, Status, content_sha256
from memlife.stores.sqlite import SqliteStore

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)
NS = "/users/u-1/facts"


def rec(rid: str, content: str = "Likes tea.", **kw: Any) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic", content=content,
                created_at=T0 - timedelta(days=40), subject="drinks", owner="team")  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


def jsonl(path: Path, *records: MemoryRecord) -> Path:
    path.write_text("".join(r.to_json() + "\n" for r in records))
    return path


@pytest.fixture(scope="module")
def harness() -> Iterator[Any]:
    from tests.fakes.agentcore import AgentCoreHarness

    h = AgentCoreHarness()
    yield h
    h.close()


# -- 1. import_removed.py brought_back(): a return is the same actor's record -----------------
def test_another_actors_record_under_a_removed_id_is_not_named_previously_deleted(
    tmp_path: Path,
) -> None:
    """Attacks the ``o.actor_id = r.actor_id`` join: ids are not unique across actors, so
    u-2's record under an id u-1's removal freed is not u-1's record coming back."""
    removed = rec("m-1")
    with SqliteStore(tmp_path / "m.db") as store:
        journal = open_journal(store)
        op = Operation("op-del-m-1", "manual-1", OpKind.delete, "u-1", NS, "m-1",
                       ["REVIEWER_DELETE"], "p1", content_sha256=removed.sha256)  # fmt: skip
        journal.plan([op])
        journal.transition(op.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
        journal.transition(op.operation_id, OpState.RECEIPTED, outcome=Outcome.deleted)
        theirs = rec("m-1", actor_id="u-2", namespace="/users/u-2/facts")
        report = import_file(store, jsonl(tmp_path / "in.jsonl", theirs), now=T0)
        assert report.imported == 1 and store.get("m-1") == theirs
        assert [w for w in report.warnings if w["code"] == "PREVIOUSLY_DELETED"] == []


# -- 2. erasure_export.py parse_erasures(): a line of no known kind refuses the whole file -----
def test_an_erasures_line_of_unknown_kind_refuses_the_file_and_applies_nothing(
    home: Path,
) -> None:
    """Attacks the ``else: raise InputError`` branch: a skipped line would apply half of an
    erasures file, a false sense of erasure."""
    erased = rec("m-1", "Drinks only green tea.")
    lines = [
        json.dumps(
            {
                "kind": "tombstone",
                "actor_id": "u-1",
                "record_id": "m-1",
                "content_sha256": content_sha256(erased.content),
            }
        ),
        json.dumps({"kind": "tombstones", "actor_id": "u-1", "record_id": "m-2"}),
    ]
    with SqliteStore(home / "memlife.db") as store:
        with pytest.raises(InputError, match=r"line 2: field 'kind'"):
            load_erasures(store, lines)
        assert tombstones.listing(store) == []


# -- 3. tombstones.py insert_new(): a store without a SQLite file refuses erased text too ------
def test_an_import_into_agentcore_refuses_erased_text_and_keeps_the_rest(
    home: Path, harness: Any, tmp_path: Path
) -> None:
    """Attacks ``refusal(store, r)`` in insert_new: AgentCore has no tombstone table of its
    own; the home's tombstones are the only thing between an old export and erased text."""
    store = harness.store()
    erased = rec("m-1", "Drinks only green tea, never coffee.")
    tombstones.add(store, [erased])
    again, other = rec("m-9", erased.content), rec("m-2", "Plays chess.")
    report = import_file(store, jsonl(tmp_path / "old.jsonl", again, other), now=T0)
    assert report.conflicts == [{"line": 1, "id": "m-9", "code": "ERASED_CONTENT"}]
    assert report.imported == 1 and store.get("m-9") is None and store.get("m-2") == other


# -- 4. tombstones.py write_replacement(): a replacement holding erased text is refused --------
def test_a_replacement_on_agentcore_carrying_erased_text_or_sources_is_refused(
    home: Path, harness: Any
) -> None:
    """Attacks the refusal check of write_replacement for stores without a shared
    transaction (AgentCore): without it the replacement is written with erased text."""
    store = harness.store()
    erased = rec("m-1", "Drinks only green tea, never coffee.")
    tombstones.add(store, [erased])
    carrying = rec("m-r1", erased.content, provenance={"supersedes": ["m-2"]})
    derived = rec("m-r2", "Prefers tea.", provenance={"supersedes": ["m-1", "m-2"]})
    for r, code in ((carrying, "ERASED_CONTENT"), (derived, "ERASED_SOURCE")):
        res = tombstones.write_replacement(store, r)
        assert [(f.id, f.code, f.retryable) for f in res.failed] == [(r.id, code, False)]
        assert res.succeeded == [] and store.get(r.id) is None
    fine = rec("m-r3", "Prefers tea.", provenance={"supersedes": ["m-2"]})
    assert tombstones.write_replacement(store, fine).succeeded == ["m-r3"]


# -- 5-7. quarantine: restore puts back what was there before the FIRST quarantine; purge only
# past its age, and only what is still quarantined --------------------------------------------
def quarantine_now(store: SqliteStore, ids: list[str], at: datetime) -> None:
    """What the gate does with a blocked deletion (run_commit.py): snapshot, then quarantine."""
    from memlife.quarantine import snapshot

    snapshot(store, ids)
    store.set_status(ids, Status.quarantined, at=at)


def test_a_record_quarantined_two_nights_running_is_restored_to_before_the_first(
    home: Path,
) -> None:
    """Attacks snapshot()'s skip of already-quarantined records: the second night's gate
    would overwrite the snapshot with "quarantined", and restore would restore nothing."""
    from memlife.quarantine import restore

    with SqliteStore(home / "memlife.db") as store:
        original = rec("m-1", status_changed_at=T0 - timedelta(days=3))
        store.put_many([original, rec("m-2", "Plays chess.")])
        quarantine_now(store, ["m-1"], T0)
        quarantine_now(store, ["m-1"], T0 + timedelta(days=1))  # blocked again next night
        out = restore(store, ["m-1"], now=T0 + timedelta(days=2))
        assert out["counts"].get("restored") == 1, out
        assert store.get("m-1") == original


def test_purge_keeps_a_record_one_day_short_of_its_grace(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks the age comparison of purge_candidates (``since <= now - older_than``)."""
    import memlife.quarantine as quarantine_mod
    from memlife.quarantine import purge

    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("m-1")])
        with monkeypatch.context() as m:  # the snapshot's wall-clock time: the run's
            m.setattr(quarantine_mod, "utcnow", lambda: T0)
            quarantine_now(store, ["m-1"], T0)
        early = purge(store, 30, now=T0 + timedelta(days=29, hours=12))
        assert early["operations"] == [] and store.get("m-1") is not None
        due = purge(store, 30, now=T0 + timedelta(days=30))
        assert [(o["record_id"], o["outcome"]) for o in due["operations"]] == [("m-1", "deleted")]
        assert store.get("m-1") is None and due["receipt"] is not None


def test_a_planned_purge_refuses_a_record_restored_meanwhile(home: Path) -> None:
    """Attacks the purge applier's NOT_QUARANTINED check: a purge planned (or resumed after a
    crash) for a record an operator has since restored must not delete the live record."""
    from memlife.quarantine import manual_run

    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("m-1")])
        quarantine_now(store, ["m-1"], T0 - timedelta(days=60))
        r = store.get("m-1")
        assert r is not None
        run = manual_run(store, "purge", ["m-1"], now=T0)
        try:
            new = run.executor.new_op(
                OpKind.purge, r.actor_id, r.namespace, r.id, ["QUARANTINE_EXPIRED"], r.sha256
            )
            (op,) = run.journal.plan([new])
            store.set_status(["m-1"], Status.active, at=T0)  # restored before the purge applies
            (done,) = run.executor.run_lifecycle([op], run.tally)
        finally:
            run.release()
        assert (done.state, done.last_error) == (OpState.FAILED, "NOT_QUARANTINED")
        kept = store.get("m-1")
        assert kept is not None and kept.status is Status.active


# -- 8-9. journal/dynamodb.py: a stale writer is refused after a full FAILED -> FAILED cycle;
# finished supersedes and settled groups carry their own TTLs ----------------------------------
@pytest.fixture()
def ddb() -> Iterator[Any]:
    from tests.support.aws_state import aws_state

    with aws_state("inprocess") as (_, state):
        yield state


def _op(rid: str, kind: OpKind = OpKind.delete) -> Operation:
    from memlife.journal import operation_id

    return Operation(operation_id("run-1", kind, [rid]), "run-1", kind, "u-1", NS, rid,
                     ["HARD_EXPIRED"], "p1", content_sha256="ab" * 32)  # fmt: skip


def test_a_stale_writer_cannot_move_an_operation_another_writer_retried(
    ddb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``attempts = :n`` in transition()'s condition: the state alone (FAILED before,
    FAILED after another writer's failed retry) cannot tell a stale read from a fresh one."""
    from memlife.journal.dynamodb import DynamoJournal

    first, second = DynamoJournal(ddb), DynamoJournal(ddb)
    (a,) = first.plan([_op("m-1")])
    retry = T0 + timedelta(hours=1)
    first.transition(a.operation_id, OpState.FAILED, error="THROTTLED", next_retry_at=retry)
    stale = first.get(a.operation_id)  # FAILED, attempts 1
    second.transition(a.operation_id, OpState.FAILED, error="THROTTLED", next_retry_at=retry)
    monkeypatch.setattr(first, "get", lambda _id: stale)  # first still believes attempt 1
    with pytest.raises(JournalStateError, match="another writer"):
        first.transition(a.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    monkeypatch.undo()
    now = first.get(a.operation_id)
    assert now is not None and (now.state, now.attempts) == (OpState.FAILED, 2)


def _expires_in_days(ddb: Any, pk: str, sk: str) -> float:
    from memlife.state.dynamodb import key

    item = ddb.get(key(pk, sk))
    return (int(item["expires_at"]["N"]) - datetime.now(UTC).timestamp()) / 86400


def test_a_receipted_supersede_outlives_superseded_retention_in_dynamodb(ddb: Any) -> None:
    """Attacks ``max(self.ttl, SUPERSEDE_TTL)``: superseded retention counts from the
    supersede's time (90 days by default), which the 30-day TTL would drop first. A
    removal voids the supersedes planned before it (a reused id, audit 47a): kept as long.
    Other operations keep the state's TTL."""
    from memlife.journal.dynamodb import DynamoJournal

    j = DynamoJournal(ddb)
    (sup, dele, quar) = j.plan([_op("m-1", OpKind.supersede), _op("m-2"),
                                _op("m-3", OpKind.quarantine)])  # fmt: skip
    for o in (sup, dele, quar):
        j.transition(o.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
        j.transition(o.operation_id, OpState.RECEIPTED)
    assert _expires_in_days(ddb, f"op#{sup.operation_id}", "op") == pytest.approx(366, abs=0.1)
    assert _expires_in_days(ddb, f"op#{dele.operation_id}", "op") == pytest.approx(366, abs=0.1)
    assert _expires_in_days(ddb, f"op#{quar.operation_id}", "op") == pytest.approx(
        ddb.settings.ttl_days, abs=0.1
    )


def test_a_settled_consolidation_outcome_expires_in_dynamodb(ddb: Any) -> None:
    """Attacks the memo's ``expires_at``: without it a settled group is never judged again
    and the table grows without bound."""
    from memlife.journal.dynamodb import DynamoJournal

    DynamoJournal(ddb).remember_outcome("g-1", "u-1", NS, "NO_MERGE", None, T0)
    assert _expires_in_days(ddb, "cout#g-1", "cout") == pytest.approx(180, abs=0.1)


# -- 10-11. stores/agentcore: every actor past the first page; throttling is not "not found" ---
def test_list_actors_follows_every_page_token(harness: Any) -> None:
    """Attacks list_actors' ``nextToken`` loop: ListActors pages at most 100 actors; a token
    dropped loses the actors after the first page (their shards never run)."""
    store, fake = harness.store(), harness.fake
    actors = [f"u-{i:03d}" for i in range(150)]
    for a in actors:
        fake.add_actor(a)
    assert list(store.list_actors()) == actors
    assert len(fake.ops("ListActors")) >= 2


def test_a_throttled_read_is_an_error_never_a_missing_record(harness: Any) -> None:
    """Attacks transport.get()'s mapping: only ResourceNotFoundException means absent. A
    read throttled past botocore's retries read as None would make a live record look
    deleted (an import would count it gone, a delete would skip it as already absent)."""
    from memlife.stores.base import StoreError

    store, fake = harness.store(), harness.fake
    r = rec("m-1")
    assert store.put_many([r]).succeeded == ["m-1"]
    fake.throttle_next(20, "GetMemoryRecord")
    try:
        with pytest.raises(StoreError) as err:
            store.get("m-1")
        assert err.value.code == "THROTTLED"
    finally:
        fake.clear_scripts()
    assert store.get("m-1") == r


# -- 12. run_scope.py unmatched_scope(): a glob is matched within the run's actors only --------
def test_a_namespace_glob_matching_only_another_actors_shards_is_named_unmatched(
    tmp_path: Path,
) -> None:
    """Attacks the ``actor not in ids`` skip: ``--actor u-1 --namespace /users/u-2/*``
    selects no shard (the run plans nothing), so it must be named (scope_unmatched), not
    passed as matched because u-2, outside the run, holds such a namespace."""
    from memlife.run_scope import unmatched_scope

    with SqliteStore(tmp_path / "m.db") as store:
        store.put_many([rec("m-1"), rec("m-2", actor_id="u-2", namespace="/users/u-2/facts")])
        assert unmatched_scope(store, ["/users/u-2/*"], ["u-1"]) == [
            ("--namespace", "/users/u-2/*"),
            ("--actor", "u-1"),
        ]
        assert unmatched_scope(store, ["/users/*/facts"], ["u-1"]) == []
