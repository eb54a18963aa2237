"""The operations engine: one applier per operation kind, the same one for first pass and resume."""

from __future__ import annotations

import json

import pytest

from memlife.apply import APPLIERS, applier_for
from memlife.journal import OpKind


@pytest.mark.parametrize("kind", list(OpKind))
def test_every_operation_kind_has_an_applier(kind: OpKind) -> None:
    applier = applier_for(kind)
    assert applier.kind is kind
    assert callable(applier.apply) and callable(applier.settle)


def test_registry_holds_nothing_but_known_kinds() -> None:
    applier_for(OpKind.delete)  # loads the registry
    assert set(APPLIERS) == set(OpKind)


# -- regressions of "What broke" (issue 11) ----------------------------------------------------
from datetime import UTC, datetime, timedelta  # noqa: E402
from pathlib import Path  # noqa: E402

from typer.testing import CliRunner  # noqa: E402

from memlife.apply import DeleteItem, Executor, Tally  # noqa: E402
from memlife.audit import FileSink, ReceiptWriteError  # noqa: E402
from memlife.cli import app  # noqa: E402
from memlife.journal import OpState, Outcome, open_journal  # noqa: E402
from memlife.model import MemoryRecord, RetentionClass, Status, content_sha256  # noqa: E402
from memlife.policy import load_policy  # noqa: E402
from memlife.receipts import operation_key  # noqa: E402
from memlife.stores.base import BatchResult, ItemFailure  # noqa: E402
from memlife.stores.sqlite import SqliteStore  # noqa: E402

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)
POLICY = load_policy("policies/default.yaml")


def rec(rid: str, content: str = "Likes tea.", **kw: object) -> MemoryRecord:
    base = dict(
        id=rid,
        actor_id="u-1",
        namespace="/users/u-1/facts",
        memory_type="semantic",
        content=content,
        created_at=T0 - timedelta(days=400),
        subject=rid,
        owner="team",
    )
    return MemoryRecord.model_validate({**base, **kw})


def executor(store: SqliteStore, sink: FileSink, at: datetime, key: str = "run-a") -> Executor:
    return Executor(
        run_id=f"run-{key}",
        run_key=key,
        policy=POLICY,
        cutoff=at,
        store=store,
        journal=open_journal(store),
        sink=sink,
    )


@pytest.fixture()
def db(home: Path):  # noqa: ANN201
    store = SqliteStore(home / "memlife.db")
    yield store, FileSink(home / "receipts")
    store.close()


def item(r: MemoryRecord) -> DeleteItem:
    return DeleteItem(r.id, r.actor_id, r.namespace, ("HARD_EXPIRED",), r.sha256)


def test_due_has_no_terminal_failure_and_pages_through_everything(db) -> None:
    store, sink = db
    ex = executor(store, sink, T0)
    ops = ex.journal.plan(
        [ex.new_op(OpKind.delete, "u-1", "/n", f"m-{i:03d}", ["X"], None) for i in range(25)]
    )
    ex.journal.transition(ops[0].operation_id, OpState.FAILED, error="LEGAL_HOLD")  # terminal
    ex.journal.transition(
        ops[1].operation_id,
        OpState.FAILED,
        error="THROTTLED",
        next_retry_at=T0 - timedelta(minutes=1),
    )
    ex.journal.transition(
        ops[2].operation_id,
        OpState.FAILED,
        error="THROTTLED",
        next_retry_at=T0 + timedelta(hours=1),
    )
    pages = list(ex.journal.due_pages(T0, page_size=7))
    seen = [o.operation_id for p in pages for o in p]
    assert len(pages) == 4 and len(seen) == len(set(seen)) == 23
    assert ops[0].operation_id not in seen and ops[2].operation_id not in seen
    assert ops[1].operation_id in seen


def test_a_record_another_operation_deleted_is_not_claimed_by_the_rerun(db, home: Path) -> None:
    """Adversarial review: the run's delete was planned, the run crashed before deleting,
    an erasure then deleted the record with its own receipt; the rerun receipted a second
    'deleted' for it (invariant 2: no receipt claims a delete that did not happen)."""
    from memlife.apply.lifecycle import run_lifecycle
    from memlife.erase import erase

    store, sink = db
    r = rec("m-exp", expires_at=T0 - timedelta(days=1))
    store.put_many([r, rec("m-other", "Likes jazz.")])
    ex = executor(store, sink, T0)
    (op,) = ex.journal.plan([ex.new_op(OpKind.delete, r.actor_id, r.namespace, r.id,
                                       ["HARD_EXPIRED"], r.sha256)])  # fmt: skip
    erase(store, "u-1", ids=["m-exp"], policy=POLICY, receipts=sink, now=T0)  # the crash gap
    (done,) = run_lifecycle(ex, [op], Tally())
    assert done.outcome is Outcome.already_absent
    body = json.loads(sink.get(operation_key(op.operation_id)) or b"{}")
    assert body["outcome"] == "already_absent"


def test_hold_placed_mid_run_defers_the_delete_for_good(db, home: Path) -> None:
    """What broke 1a: after `hold release`, a later night replayed the deferred delete."""
    from memlife.erase import release_hold

    store, sink = db
    r = rec("m-exp", expires_at=T0 - timedelta(days=1))
    store.put_many([r])
    planned = item(r)
    # re-import places a hold (and a new deadline) between planning and deletion
    store.put_many(
        [
            r.model_copy(
                update={
                    "retention_class": RetentionClass.legal_hold,
                    "expires_at": T0 + timedelta(days=90),
                }
            )
        ]
    )
    tally = Tally()
    executor(store, sink, T0).delete([planned], tally)
    assert store.get("m-exp") is not None and tally.counts["failed"] == 1
    release_hold(store, ["m-exp"], policy=POLICY, receipts=sink, now=T0 + timedelta(hours=1))
    night3 = Tally()
    executor(store, sink, T0 + timedelta(days=2), key="run-c").resume_due(night3)
    assert store.get("m-exp") is not None, "a terminal LEGAL_HOLD failure was replayed"
    assert night3.counts["deleted"] == 0 and night3.counts["failed"] == 0


@pytest.mark.parametrize("status", [Status.pending_delete, Status.superseded])
def test_refused_restore_is_not_replayed(db, status: Status) -> None:
    """What broke 1b: a refused restore (NOT_QUARANTINED) resurrected the record next night."""
    from memlife.quarantine import restore

    store, sink = db
    extra = {"provenance": {"replaced_by": "m-new"}} if status is Status.superseded else {}
    store.put_many([rec("m-new", "Likes coffee."), rec("pd-1", status=status, **extra)])
    out = restore(store, ["pd-1"], policy=POLICY, receipts=sink, now=T0)
    assert out["status"] == "partial_failure"
    assert out["operations"][0]["error"] == "NOT_QUARANTINED"
    for night in range(1, 4):
        ex = executor(store, sink, T0 + timedelta(days=night), key=f"night-{night}")
        tally = Tally()
        ex.resume_due(tally)
        assert store.get("pd-1").status is status, "the user's forget was undone"
        assert tally.counts["restored"] == 0 and tally.counts["failed"] == 0


def test_write_without_payload_ends_its_supersedes_once(db) -> None:
    """What broke 1c: a kill after the journal write, then erasure of the payload: NO_PAYLOAD
    every night, supersedes PLANNED forever, every night partial_failure."""
    store, sink = db
    a, b = rec("m-a", "Likes tea."), rec("m-b", "Likes green tea.")
    store.put_many([a, b])
    ex = executor(store, sink, T0)
    repl = rec("m-r", "Likes green tea.", provenance={"supersedes": ["m-a", "m-b"]})
    ex.journal.plan(
        [
            ex.new_op(
                OpKind.write_replacement,
                "u-1",
                a.namespace,
                "m-r",
                ["CONSOLIDATION"],
                content_sha256(repl.content),
                payload=repl.to_json(),
            ),
            *(
                ex.new_op(
                    OpKind.supersede,
                    "u-1",
                    a.namespace,
                    x.id,
                    ["SAME_SUBJECT"],
                    x.sha256,
                    replacement="m-r",
                )
                for x in (a, b)
            ),
        ]
    )  # the crash: nothing applied
    assert ex.journal.forget_payloads(["m-a"]) == 1  # what erasure does to the payload
    first = Tally()
    executor(store, sink, T0 + timedelta(days=1), key="n1").resume_due(first)
    assert first.counts["failed"] == 3  # the write (NO_PAYLOAD) and its two supersedes, once
    assert {f["code"] for f in first.failures} == {"NO_PAYLOAD", "REPLACEMENT_NOT_WRITTEN"}
    for night in range(2, 4):
        later = Tally()
        n = executor(store, sink, T0 + timedelta(days=night), key=f"n{night}").resume_due(later)
        assert n == 0 and later.counts["failed"] == 0
    assert {o.record_id for o in ex.journal.terminal_failures()} == {"m-r", "m-a", "m-b"}
    assert store.get("m-a").status is Status.active and store.get("m-r") is None


class FlakySink(FileSink):
    """Operation receipts fail (an S3 outage) while ``down``; everything else works."""

    down = True

    def put_new(self, key: str, body: bytes, content_type: str = "application/json") -> bool:
        if self.down and key.startswith("operations/"):
            raise ReceiptWriteError(f"{key}: outage")
        return super().put_new(key, body, content_type)


def test_erase_during_receipt_outage_is_receipted_by_the_next_erase(db, home: Path) -> None:
    """What broke 2a: erase/purge were never resumed; a deleted record stayed unreceipted."""
    from memlife.erase import erase

    store, _ = db
    store.put_many([rec("m-x", subject="cats"), rec("m-y", "Likes dogs.", subject="dogs")])
    flaky = FlakySink(home / "receipts")
    out = erase(store, "u-1", subject="cats", policy=POLICY, receipts=flaky, now=T0)
    assert store.get("m-x") is None and out["status"] == "partial_failure"
    op = next(o for o in open_journal(store).for_record("m-x") if o.kind is OpKind.erase)
    assert op.state is OpState.APPLIED
    flaky.down = False
    erase(store, None, pending=True, policy=POLICY, receipts=flaky, now=T0 + timedelta(hours=1))
    assert open_journal(store).get(op.operation_id).state is OpState.RECEIPTED
    assert flaky.get(operation_key(op.operation_id)) is not None


class NoManifestSink(FileSink):
    """The receipts bucket is gone: every write fails (the manifest first)."""

    def put_new(self, key: str, body: bytes, content_type: str = "application/json") -> bool:
        raise ReceiptWriteError(f"{key}: NoSuchBucket")


def test_erase_changes_nothing_when_its_manifest_cannot_be_written(db, home: Path) -> None:
    """Invariant 2 for manual runs (erase, restore, purge, hold release, import --update):
    a swallowed manifest failure once let erase delete with no evidence at all."""
    from memlife.erase import erase
    from memlife.lease import for_store

    store, _ = db
    store.put_many([rec("m-x", subject="cats")])
    with pytest.raises(ReceiptWriteError):
        erase(store, "u-1", subject="cats", policy=POLICY, receipts=NoManifestSink(home / "r"),
              now=T0)  # fmt: skip
    assert store.get("m-x") is not None
    assert not [o for o in open_journal(store).for_record("m-x") if o.kind is OpKind.erase]
    lease = for_store(store, "next", "manual:erase")  # the failed run gave its lease back
    lease.release()


def test_purge_and_erase_resume_in_the_nightly_retry_queue(db, home: Path) -> None:
    from memlife.erase import erase
    from memlife.pipeline import RunConfig, run_local

    store, _ = db
    store.put_many([rec("m-x", subject="cats")])
    flaky = FlakySink(home / "receipts")
    erase(store, "u-1", subject="cats", policy=POLICY, receipts=flaky, now=T0)
    summary = run_local(RunConfig(dry_run=False, retry_only=True, now=T0 + timedelta(days=1)))
    assert summary.status == "success"
    op = next(o for o in open_journal(store).for_record("m-x") if o.kind is OpKind.erase)
    assert (
        op.state is OpState.RECEIPTED
        and (home / "receipts" / operation_key(op.operation_id)).exists()
    )


def test_a_long_terminal_backlog_starves_nothing(db) -> None:
    """What broke 2b: LIMIT 10000 behind 10,001 deferred erasures hid an APPLIED delete."""
    store, sink = db
    ex = executor(store, sink, T0)
    now = (T0 - timedelta(days=1)).isoformat()
    rows = [
        (
            f"op-held-{i:05d}",
            "run-old",
            "erase",
            "u-1",
            "/n",
            f"m-{i}",
            "[]",
            "v1",
            None,
            None,
            "FAILED",
            "failed",
            1,
            None,
            "LEGAL_HOLD",
            None,
            now,
            now,
        )
        for i in range(10_001)
    ]
    with store.lock:
        from memlife.journal.sqlite import _COLS  # named: columns added later stay NULL

        store.connection.executemany(
            f"INSERT INTO operations ({', '.join(_COLS)}) VALUES ({', '.join('?' * 18)})", rows
        )
    orphan = ex.journal.plan(
        [ex.new_op(OpKind.delete, "u-1", "/n", "m-gone", ["HARD_EXPIRED"], None)]
    )[0]
    ex.journal.transition(orphan.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
    tally = Tally()
    executor(store, sink, T0 + timedelta(days=1), key="n1").resume_due(tally)
    assert ex.journal.get(orphan.operation_id).state is OpState.RECEIPTED
    assert sink.get(operation_key(orphan.operation_id)) is not None


class FailOncePut:
    """A store whose first put_many fails retryably (throttled), then works; it has no
    conditional writes (as AgentCore), so the appliers put whole records."""

    writes_as_read = False

    def __init__(self, inner: SqliteStore):
        self.inner, self.failed = inner, False

    def put_many(self, records):  # noqa: ANN001, ANN201
        if not self.failed:
            self.failed = True
            return BatchResult(failed=[ItemFailure(r.id, "THROTTLED") for r in records])
        return self.inner.put_many(records)

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self.inner, name)


def test_resumed_restore_puts_the_snapshot_back_not_active(db) -> None:
    """What broke 6: a restore resumed by the retry queue set status `active`."""
    from memlife.quarantine import restore, snapshot

    store, sink = db
    changed = T0 - timedelta(days=3)
    store.put_many([rec("m-q", status=Status.pending_delete, status_changed_at=changed)])
    before = store.get("m-q")
    snapshot(store, ["m-q"])
    store.set_status(["m-q"], Status.quarantined, at=T0 - timedelta(days=1))
    out = restore(FailOncePut(store), ["m-q"], policy=POLICY, receipts=sink, now=T0)
    assert out["operations"][0]["error"] == "THROTTLED"
    executor(store, sink, T0 + timedelta(days=1), key="n1").resume_due(Tally())
    assert store.get("m-q") == before


def test_changed_record_is_a_stale_precondition_and_untouched(db) -> None:
    store, sink = db
    r = rec("m-s", expires_at=T0 - timedelta(days=1))
    store.put_many([r])
    planned = item(r)
    store.put_many([r.model_copy(update={"content": "Likes mint tea now."})])  # changed since
    tally = Tally()
    executor(store, sink, T0).delete([planned], tally)
    assert store.get("m-s") is not None
    assert [f["code"] for f in tally.failures] == ["STALE_PRECONDITION"]
    assert open_journal(store).terminal_failures()[0].last_error == "STALE_PRECONDITION"


def test_run_json_exits_3_on_partial_failure(db, home: Path) -> None:
    """What broke 7a: `memlife run --json` exited 0 on partial_failure."""
    store, sink = db
    store.put_many([rec("m-orig")])
    ex = executor(store, sink, T0)
    op = ex.journal.plan(
        [
            ex.new_op(
                OpKind.supersede,
                "u-1",
                "/users/u-1/facts",
                "m-orig",
                ["SAME_SUBJECT"],
                None,
                replacement="m-never",
            )
        ]
    )[0]
    ex.journal.transition(op.operation_id, OpState.FAILED, error="THROTTLED", next_retry_at=T0)
    res = CliRunner().invoke(
        app,
        [
            "run",
            "--engine",
            "local",
            "--retry-only",
            "--json",
            "--now",
            (T0 + timedelta(days=1)).isoformat(),
        ],
    )
    assert res.exit_code == 3, res.output
    assert '"status": "partial_failure"' in res.stdout


class RefusingModel:
    """Stands in for a model whose every answer fails grounding; each call sent 2 requests."""

    name = "refusing"

    def __init__(self) -> None:
        self.calls = 0

    def consolidate(self, group):  # noqa: ANN001, ANN201
        from memlife.consolidate.base import ConsolidationError

        self.calls += 1
        exc = ConsolidationError("UNGROUNDED_CLAIM")
        exc.requests, exc.input_tokens, exc.output_tokens = 2, 300, 40
        raise exc


def test_rejected_group_is_counted_backs_off_then_goes_to_review(db) -> None:
    """What broke 7b: a grounding rejection counted 0 calls and was re-sent every night."""
    from memlife.apply.rejections import MAX_REJECTIONS
    from memlife.plan import Action, Decision

    store, sink = db
    store.put_many([rec("m-1", subject="tea"), rec("m-2", subject="tea")])
    members = [
        Decision(i, "u-1", "/users/u-1/facts", Action.consolidate_candidate, [], group="g")
        for i in ("m-1", "m-2")
    ]
    model = RefusingModel()
    for night in range(1, MAX_REJECTIONS + 2):
        ex = executor(store, sink, T0 + timedelta(days=2 * night), key=f"n{night}")
        ex.consolidator = model
        tally = Tally()
        ex.consolidate_shard(members, tally)
        if night <= MAX_REJECTIONS:
            assert (tally.model_calls, tally.input_tokens) == (2, 300), "every request counts"
        else:
            assert tally.model_calls == 0 and tally.counts["consolidation_in_review"] == 1
        if night == 1:  # the same night again: backing off, not re-sent
            again = Tally()
            ex.consolidate_shard(members, again)
            assert again.model_calls == 0 and again.counts["consolidation_backing_off"] == 1
    assert model.calls == MAX_REJECTIONS
    review = open_journal(store).groups_in_review()
    assert [(g["code"], g["attempts"]) for g in review] == [("UNGROUNDED_CLAIM", MAX_REJECTIONS)]
    assert store.get("m-1").status is Status.active  # originals untouched


def test_ops_failed_lists_terminal_failures_and_resolve_decides(db) -> None:
    import json

    store, sink = db
    r = rec("m-h", retention_class=RetentionClass.legal_hold, expires_at=T0 - timedelta(days=1))
    store.put_many([r])
    executor(store, sink, T0).delete([item(r)], Tally())
    runner = CliRunner()
    res = runner.invoke(app, ["ops", "failed", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["operations"]
    assert [(o["record_id"], o["code"]) for o in rows] == [("m-h", "LEGAL_HOLD")]
    op_id = rows[0]["operation_id"]
    res = runner.invoke(app, ["ops", "resolve", op_id, "--decision", "requeue", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["resolution"] == "requeued"
    assert [o.operation_id for o in open_journal(store).due(datetime.now(UTC))] == [op_id]
    executor(store, sink, datetime.now(UTC), key="n1").resume_due(
        Tally()
    )  # still held: fails again
    assert open_journal(store).terminal_failures()[0].operation_id == op_id
    res = runner.invoke(app, ["ops", "resolve", op_id, "--decision", "dismiss"])
    assert res.exit_code == 0 and res.output.strip().endswith(": dismissed"), (
        res.output
    )  # not "dismissd"
    assert res.exit_code == 0
    assert json.loads(runner.invoke(app, ["ops", "failed", "--json"]).stdout)["operations"] == []
    assert store.get("m-h") is not None
    res = runner.invoke(app, ["ops", "resolve", "op-nope", "--decision", "dismiss"])
    assert res.exit_code == 1 and "Traceback" not in res.output


def test_a_dry_run_keeps_no_journal_and_an_apply_run_needs_one(db) -> None:  # noqa: ANN001
    store, sink = db
    base = dict(run_id="r", run_key="k", policy=POLICY, cutoff=T0, store=store, sink=sink)
    dry = Executor(**base, journal=None, dry_run=True)
    with pytest.raises(RuntimeError, match="keeps no journal"):
        dry.journal  # noqa: B018 - asking is the bug this refuses
    with pytest.raises(ValueError, match="needs a journal"):
        Executor(**base, journal=None)
    assert not store.connection.execute(
        "SELECT 1 FROM sqlite_master WHERE name='operations'"
    ).fetchall()  # nothing created the journal table
