"""process_batch keeps bad input and bugs apart.

A stored record that does not decode (bad input already in the store) stops its shard
only: the shard is reported with the record id and field, the other shards are planned.
An unexpected ValueError from our own code is a bug, not bad input: it propagates (under
Prefect the task fails and the flow reports the shard as crashed, tests/e2e/test_fanout.py).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memlife.demo import generate
from memlife.errors import CorruptRecordError
from memlife.model import PlanView
from memlife.pipeline import RunConfig
from memlife.plan import Planner
from memlife.report import ReportWriter
from memlife.run_planning import process_batch
from memlife.run_start import start_run
from memlife.run_types import Shard
from memlife.stores.agentcore.mapping import ID_KEY, decode_record
from memlife.stores.sqlite import SqliteStore

CUTOFF = datetime(2026, 3, 1, tzinfo=UTC)


class CorruptShardStore(SqliteStore):
    """A real SQLite store, except that one shard's page holds an AgentCore record whose
    metadata does not decode (the real mapping code raises, as the AgentCore store would)."""

    bad: Shard | None = None

    def page_views(
        self, actor_id: str, namespace: str, **kw: Any
    ) -> tuple[list[PlanView], str | None]:
        if self.bad is not None and (actor_id, namespace) == (
            self.bad.actor_id,
            self.bad.namespace,
        ):
            raw = {
                "memoryRecordId": "mem-native-7",
                "namespaces": [namespace],
                "content": {"text": "x"},
                "metadata": {
                    ID_KEY: {"stringValue": "m-7"},
                    "created_at": {"stringValue": "yesterday"},
                },
            }
            decode_record(raw, None)
        return super().page_views(actor_id, namespace, **kw)


@pytest.fixture()
def setup(home: Path) -> tuple[Any, CorruptShardStore, list[Shard]]:
    path = home / "pb.db"
    store = CorruptShardStore(path)
    store.put_many(list(generate(300, seed=7)))
    ctx = start_run(RunConfig(dry_run=True, now=CUTOFF, store=f"sqlite:///{path}"))
    shards = [
        Shard(a, ns) for a in sorted(store.list_actors())[:3] for ns in store.list_namespaces(a)
    ]
    yield ctx, store, shards
    store.close()


def _planning_raises(monkeypatch: pytest.MonkeyPatch, shard: Shard, exc: Exception) -> None:
    """Planner.plan_shard raises ``exc`` for ``shard``'s actor; plans the others as usual."""
    real = Planner.plan_shard

    def raising(self: Planner, pages: Any, hints: Any = None) -> Any:
        pages = [list(p) for p in pages]
        if any(v.actor_id == shard.actor_id for p in pages for v in p):
            raise exc
        return real(self, pages, hints)

    monkeypatch.setattr(Planner, "plan_shard", raising)


def test_a_record_that_does_not_decode_stops_its_shard_only(setup: Any) -> None:
    ctx, store, shards = setup
    store.bad = shards[1]
    report = ReportWriter(ctx.report_dir)
    try:
        out = process_batch(ctx, store, shards, report)
    finally:
        report.close()
    assert out.failed_shards == [
        {
            "shard": str(shards[1]),
            "actor_id": shards[1].actor_id,
            "namespace": shards[1].namespace,
            "code": "CORRUPT_RECORD",
            "record_id": "mem-native-7",
            "field": "created_at",
        }
    ]
    assert out.shards == len(shards) - 1 and out.records > 0  # the rest of the batch went on


def test_an_unexpected_value_error_is_a_bug_and_propagates(
    setup: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx, store, shards = setup
    _planning_raises(monkeypatch, shards[1], ValueError("a bug in our own planning code"))
    report = ReportWriter(ctx.report_dir)
    try:
        with pytest.raises(ValueError, match="a bug in our own planning code"):
            process_batch(ctx, store, shards, report)
    finally:
        report.close()


def test_corrupt_record_error_names_record_and_field() -> None:
    exc = CorruptRecordError("m-1", "confidence", "not a number")
    assert str(exc) == "record m-1: field 'confidence': not a number"
    assert exc.code == "CORRUPT_RECORD" and exc.record_id == "m-1" and exc.field == "confidence"


@pytest.mark.parametrize(
    ("column", "value", "field"),
    [
        ("memory_type", "CONTENTSECRET Drinks only green tea.", "memory_type"),
        ("status", "CONTENTSECRET", "status"),
        ("retention_class", "CONTENTSECRET", "retention_class"),
        ("created_ts", "CONTENTSECRET", "created_at"),
        ("confidence", "CONTENTSECRET", "confidence"),
    ],
)
def test_a_stored_row_with_a_bad_value_stops_its_shard_only_and_never_prints_it(
    home: Path, capsys: pytest.CaptureFixture[str], column: str, value: object, field: str
) -> None:
    """Adversarial review: a row written by hand (or a damaged file) with text in its
    memory_type reached the planner's fast path unchecked: a KeyError ended the whole run
    and printed the stored text. Now the shard is reported with the record and the field,
    the other shards are planned, and the value appears nowhere. (Rows are checked only
    once a shard fails to plan, stores/sqlite_rows.py: a bad value planning can read, such
    as a BLOB owner, is not looked for.)"""
    from memlife.pipeline import run_local

    store = SqliteStore(home / "memlife.db")
    store.put_many(list(generate(120, seed=5, anchor=CUTOFF)))
    victim = store.connection.execute("SELECT id, actor_id FROM records LIMIT 1").fetchone()
    store.connection.execute(f"UPDATE records SET {column}=? WHERE id=?", (value, victim[0]))
    store.close()
    summary = run_local(RunConfig(dry_run=True, now=CUTOFF))
    out = capsys.readouterr()
    (failed,) = summary.failed_shards
    assert (failed["code"], failed["record_id"], failed["field"]) == (
        "CORRUPT_RECORD", victim[0], field,
    )  # fmt: skip
    assert summary.records > 100  # the other shards were planned
    evidence = out.out + out.err + json.dumps(summary.as_json())
    if summary.receipt:
        evidence += Path(summary.receipt).read_text()
    assert "CONTENTSECRET" not in evidence


def test_bad_input_raised_while_planning_stops_its_shard_only(
    setup: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An InputError is a ValueError too: the search for an unreadable row (for KeyError,
    TypeError and ValueError from the hot path) must not turn bad input into a crash."""
    from memlife.errors import InputError

    ctx, store, shards = setup
    _planning_raises(monkeypatch, shards[1], InputError("a record the planner refuses"))
    report = ReportWriter(ctx.report_dir)
    try:
        out = process_batch(ctx, store, shards, report)
    finally:
        report.close()
    failed = {f["shard"] for f in out.failed_shards}
    assert str(shards[1]) in failed and len(failed) < len(shards)
