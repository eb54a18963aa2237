"""`receipts verify` judges "moved after the run sealed" by who moved it, not by clocks.

Written as an adversary would: receipts in S3 (moto), workers whose clocks disagree. The
clock is the project's own (``memlife.model.utcnow``), shifted for every memlife module
at once while a "worker" runs; the store fails deletes at its boundary (THROTTLED).
"""

from __future__ import annotations

import io
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pyarrow.parquet as pq
import pytest
from moto import mock_aws

from memlife import model, pipeline
from memlife.apply import Executor, Tally
from memlife.apply import lifecycle as lifecycle_mod
from memlife.audit import ReceiptWriteError, open_sink
from memlife.journal import Operation, OpKind, OpState, Outcome, SqliteJournal, open_journal
from memlife.pipeline import RunConfig, run_local
from memlife.receipts import PARQUET_SCHEMA
from memlife.review import verify_run
from memlife.run_types import RunSummary
from memlife.stores.base import BatchResult, ItemFailure
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import CUTOFF, seed

RECEIPTS = "s3://receipts/memlife"
_SKEW = [timedelta(0)]  # read by the shifted clock; 0 again after each test


def _shifted() -> datetime:
    return _REAL_UTCNOW() + _SKEW[0]


_REAL_UTCNOW = model.utcnow


@contextmanager
def worker_clock(monkeypatch: pytest.MonkeyPatch, offset: timedelta) -> Iterator[None]:
    """Every memlife module's ``utcnow`` (the project's clock) reads ``offset`` off the true
    time while the block runs: a worker whose clock is behind (negative) or ahead."""
    for name, mod in list(sys.modules.items()):
        if name.startswith("memlife") and getattr(mod, "utcnow", None) is _REAL_UTCNOW:
            monkeypatch.setattr(mod, "utcnow", _shifted)
    _SKEW[0] = offset
    try:
        yield
    finally:
        _SKEW[0] = timedelta(0)


class Throttled(SqliteStore):
    """The first three ids of every delete batch fail (retryable) while ``fail`` is set."""

    fail = True

    def delete_many(self, ids, **kw):  # type: ignore[no-untyped-def]
        ids = list(ids)
        if not Throttled.fail:
            return super().delete_many(ids, **kw)
        res = super().delete_many(ids[3:], **kw)
        return BatchResult(res.succeeded, [ItemFailure(i, "THROTTLED") for i in ids[:3]],
                           res.missing)  # fmt: skip


@pytest.fixture()
def night(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A store whose deletes are throttled, receipts in S3 (moto), ``apply(cutoff)``."""
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    for k, v in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                 ("AWS_DEFAULT_REGION", "us-east-1")):  # fmt: skip
        monkeypatch.setenv(k, v)
    db = tmp_path / "memlife.db"
    seed(db)
    monkeypatch.setattr(pipeline, "open_store", lambda url=None: Throttled(db))
    monkeypatch.setattr(Throttled, "fail", True)

    def apply(now: datetime) -> RunSummary:
        return run_local(RunConfig(dry_run=False, now=now, store=f"sqlite:///{db}",
                                   receipts=RECEIPTS))  # fmt: skip

    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="receipts")
        yield {"db": db, "apply": apply}


def problems(night: dict[str, Any], run_id: str) -> list[dict[str, Any]]:
    store = SqliteStore(night["db"])
    try:
        return verify_run(open_sink(RECEIPTS), store, open_journal(store), run_id).problems
    finally:
        store.close()


def ops_of(night: dict[str, Any], run_id: str) -> list[Operation]:
    store = SqliteStore(night["db"])
    try:
        return open_journal(store).by_run(run_id)
    finally:
        store.close()


def first_night(night: dict[str, Any]) -> RunSummary:
    summary = night["apply"](CUTOFF)
    assert summary.status == "partial_failure" and summary.lifecycle["failed"] > 0
    assert problems(night, summary.run_id) == []
    return summary


# -- (1) an honest retry on a worker whose clock is behind -----------------------------------
def test_a_retry_on_a_worker_ten_minutes_behind_leaves_the_sealed_run_verified(
    night: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Old code: JOURNAL_PARQUET_MISMATCH for every retried operation: the retry's journal
    times (its clock) read as earlier than the first run's ``finished_at`` (another clock)."""
    first = first_night(night)
    failed = {o.operation_id for o in ops_of(night, first.run_id) if o.state is OpState.FAILED}
    Throttled.fail = False
    with worker_clock(monkeypatch, -timedelta(minutes=10)):
        retry = night["apply"](CUTOFF + timedelta(days=2))
    assert retry.status == "success" and retry.run_id != first.run_id
    after = {o.operation_id: o for o in ops_of(night, first.run_id)}
    assert failed and all(after[oid].state is OpState.RECEIPTED for oid in failed)
    assert problems(night, first.run_id) == []
    assert problems(night, retry.run_id) == []
    # the retry named itself as the mover: that, not its clock, is what verify read
    assert {after[oid].moved_by for oid in failed} == {retry.run_id}


# -- (2) the sealing worker moves an operation after its seal, clock set ahead ---------------
def test_the_sealing_worker_moving_an_operation_after_its_seal_is_a_mismatch(
    night: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Old code: verified clean: the move's time (a clock ten minutes ahead) read as a later
    retry's. The run's own executor, right after its receipt is written, claims a
    throttled delete as done."""
    seen: list[Executor] = []
    moved: list[str] = []
    make_executor, finish_run = pipeline.make_executor, pipeline.finish_run

    def keep(*a: Any, **kw: Any) -> Executor:
        seen.append(make_executor(*a, **kw))
        return seen[-1]

    def finish_then_move(*a: Any, **kw: Any) -> Any:
        summary = finish_run(*a, **kw)  # sealed: Parquet, dataset part, receipt
        ex = seen[0]
        victim = next(o for o in ex.journal.by_run(ex.run_id) if o.state is OpState.FAILED)
        with worker_clock(monkeypatch, timedelta(minutes=10)):
            lifecycle_mod._apply(ex, [victim], lambda ops: {victim.operation_id: Outcome.deleted},
                                 Tally())  # fmt: skip
        moved.append(victim.operation_id)
        return summary

    monkeypatch.setattr(pipeline, "make_executor", keep)
    monkeypatch.setattr(pipeline, "finish_run", finish_then_move)
    summary = night["apply"](CUTOFF)
    assert summary.status == "partial_failure" and moved
    found = [(p["code"], p.get("operation_id")) for p in problems(night, summary.run_id)]
    assert ("JOURNAL_PARQUET_MISMATCH", moved[0]) in found, found


# -- (3) a journal row from before movers were recorded: the old rule still holds -----------
def _forget_movers(db: Path, run_id: str, updated_at: datetime | None = None) -> None:
    """Make the run's rows as the journal wrote them before movers existed."""
    con = sqlite3.connect(db)
    try:
        sets = "moved_by=NULL, moved_after_receipts=NULL"
        args: list[Any] = [run_id]
        if updated_at is not None:
            sets += ", updated_at=?"
            args.insert(0, updated_at.isoformat())
        with con:
            con.execute(f"UPDATE operations SET {sets} WHERE run_id=? AND state='RECEIPTED' "
                        "AND kind='delete'", args)  # fmt: skip
    finally:
        con.close()


def test_a_row_without_a_mover_is_judged_by_the_old_wall_clock_rule(
    night: dict[str, Any],
) -> None:
    first = first_night(night)
    failed = {o.operation_id for o in ops_of(night, first.run_id) if o.state is OpState.FAILED}
    Throttled.fail = False
    assert night["apply"](CUTOFF + timedelta(days=2)).status == "success"
    _forget_movers(night["db"], first.run_id)  # a retry by a version that named no mover
    after = {o.operation_id: o for o in ops_of(night, first.run_id)}
    assert all(after[oid].moved_by is None for oid in failed)
    assert problems(night, first.run_id) == []  # later than the run finished: a retry's
    # ... and one the clocks place inside the run is what the old rule always reported
    _forget_movers(night["db"], first.run_id, CUTOFF - timedelta(days=1))
    codes = {(p["code"], p.get("operation_id")) for p in problems(night, first.run_id)}
    assert {("JOURNAL_PARQUET_MISMATCH", oid) for oid in failed} <= codes


# -- a rerun of the same run after its seal is a later attempt, not the sealing one ----------
def test_a_rerun_receipting_what_the_sealed_attempt_left_verifies(
    night: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's own move after its seal is legitimate when a later attempt made it (begun
    once the receipt existed): a receipt that failed to write, written by a rerun of the
    same run (same cutoff, same run id) on a worker whose clock is behind."""
    Throttled.fail = False
    write = lifecycle_mod.write_operation_receipt
    failing: list[str] = []

    def once(sink: Any, op: Operation, reviewer: str | None = None) -> bool:
        if not failing and op.kind is OpKind.delete:
            failing.append(op.operation_id)
            raise ReceiptWriteError("S3 unavailable")
        return write(sink, op, reviewer)

    monkeypatch.setattr(lifecycle_mod, "write_operation_receipt", once)
    first = night["apply"](CUTOFF)
    assert first.status == "partial_failure" and failing
    assert {o.operation_id: o.state for o in ops_of(night, first.run_id)}[failing[0]] is (
        OpState.APPLIED
    )
    with worker_clock(monkeypatch, -timedelta(minutes=10)):
        again = night["apply"](CUTOFF)
    assert again.run_id == first.run_id
    op = {o.operation_id: o for o in ops_of(night, first.run_id)}[failing[0]]
    assert op.state is OpState.RECEIPTED
    assert problems(night, first.run_id) == []
    assert (op.moved_by, op.moved_after_receipts) == (first.run_id, 1)


# -- (4) SQLite: a journal file of the old schema opens, migrates and records movers ----------
OLD_SCHEMA = """
CREATE TABLE operations (
    operation_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, kind TEXT NOT NULL,
    actor_id TEXT NOT NULL, namespace TEXT NOT NULL, record_id TEXT NOT NULL,
    reasons TEXT NOT NULL, policy_version TEXT NOT NULL, content_sha256 TEXT,
    replacement_id TEXT, state TEXT NOT NULL, outcome TEXT,
    attempts INTEGER NOT NULL DEFAULT 0, next_retry_at TEXT, last_error TEXT, payload TEXT,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, resolution TEXT, resolved_at TEXT
);
INSERT INTO operations VALUES ('op-old', 'run-old', 'delete', 'u-1', '/users/u-1/facts', 'm-1',
    '["HARD_EXPIRED"]', 'p1', NULL, NULL, 'FAILED', 'failed', 1, '2026-11-02T00:00:00+00:00',
    'THROTTLED', NULL, '2026-11-01T12:00:00+00:00', '2026-11-01T12:00:01+00:00', NULL, NULL);
"""


@pytest.mark.parametrize("first_release", [False, True])
def test_a_journal_of_the_old_schema_opens_and_records_movers(
    tmp_path: Path, first_release: bool
) -> None:
    path = tmp_path / "journal.db"
    con = sqlite3.connect(path)
    schema = OLD_SCHEMA
    if first_release:  # before resolution / resolved_at, too
        schema = schema.replace(", resolution TEXT, resolved_at TEXT", "").replace(
            ", NULL, NULL);", ");"
        )
    con.executescript(schema)
    con.close()
    journal = SqliteJournal.at(path)
    old = journal.get("op-old")
    assert old is not None and old.state is OpState.FAILED
    assert (old.moved_by, old.moved_after_receipts) == (None, None)
    from memlife.journal import Mover

    moved = journal.transition("op-old", OpState.APPLIED, outcome=Outcome.deleted,
                               by=Mover("run-later", 0))  # fmt: skip
    assert (moved.moved_by, moved.moved_after_receipts) == ("run-later", 0)
    again = SqliteJournal.at(path)  # a second open: nothing to add, the value kept
    assert again.get("op-old").moved_by == "run-later"  # type: ignore[union-attr]
    cols = [r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(operations)")]
    assert cols.count("moved_by") == 1 and cols.count("moved_after_receipts") == 1


def test_receipts_stay_content_free_and_name_no_mover(night: dict[str, Any]) -> None:
    """The mover lives in the journal only: no receipt or Parquet column gains it."""
    first = first_night(night)
    sink = open_sink(RECEIPTS)
    assert "moved_by" not in PARQUET_SCHEMA.names
    key = next(k for k in sink.list("runs/") if k.endswith("operations.parquet"))
    body = sink.get(key)
    assert body is not None
    assert set(pq.read_table(io.BytesIO(body)).column_names) == set(PARQUET_SCHEMA.names)
    receipts = [sink.get(k) or b"" for k in sink.list("operations/")]
    receipts += [sink.get(k) or b"" for k in sink.list("runs/") if k.endswith(".json")]
    assert receipts and not any(b"moved_by" in b or first.run_id.encode() + b"@" in b
                                for b in receipts)  # fmt: skip
