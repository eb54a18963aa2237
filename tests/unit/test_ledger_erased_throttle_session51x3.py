"""Audit 51x3 (session 51: state off the worker): an online worker's ledger flush while the
state table throttles the tombstone read that keeps erased records' reads out.

Every flush goes through ``ledger_ingest.write_checked``: rows of records an erasure of the
watched store removed are left out, since the erasure's own scrub of the ledger ran before
these buffered rows were written (a worker buffers reads for up to ``flush_seconds``). The
erased (actor, id) pairs come from the store's tombstones, in the DynamoDB state table with
MEMLIFE_STATE. ``tombstones.erased_times`` read any failure of that listing as "a closed or
failing store" and counted nothing erased: under ProvisionedThroughputExceeded (after
botocore's own attempts) the erased record's read was written to the S3 ledger, and the
after-write scrub, throttled alike, let it stay for good, silently.

Real components: the AgentCore store (fake behind real boto3), moto's DynamoDB and S3 state,
the S3 ledger; the throttle is injected at the DynamoDB client's boundary (a botocore hook
answering as botocore raises once its retries are spent)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

import memlife.state as state_mod
from memlife import tombstones
from memlife.demo import generate
from memlife.model import MemoryRecord, utcnow
from memlife.state.dynamodb import DynamoState
from memlife.state.ledger import S3AccessLedger
from memlife.throttling import is_throttling
from tests.fakes.agentcore import AgentCoreHarness, bulk_load
from tests.support.aws_state import provision, state_url
from tests.support.lifecycle import ANCHOR


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


def _throttled(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
    parsed = {"Error": {"Code": "ProvisionedThroughputExceededException",
                        "Message": "Rate exceeded"},
              "ResponseMetadata": {"HTTPStatusCode": 400}}  # fmt: skip
    return AWSResponse("https://dynamodb", 400, {}, None), parsed


def _erased_while_buffered(
    harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str
) -> tuple[S3AccessLedger, DynamoState, MemoryRecord, MemoryRecord]:
    """A worker's ledger buffers a read of ``victim`` and one of ``kept``; then ``victim`` is
    erased (tombstone, delete, the eraser's scrub of the ledger, in its own ledger object:
    another process), before the worker flushes."""
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    recs = list(generate(4, seed=3, anchor=ANCHOR, per_actor=4))
    store = harness.store()
    bulk_load(store, harness.fake, recs)
    surl = state_url(table).replace("/parts", f"/{table}")  # a ledger of its own
    provision(surl)
    monkeypatch.setenv("MEMLIFE_STATE", surl)
    monkeypatch.setattr(state_mod, "_open", {})
    state = state_mod.current()
    assert state is not None
    victim, kept = recs[0], recs[1]
    worker = S3AccessLedger(state)
    worker.watch_erasures(store)
    read_at = utcnow() - timedelta(minutes=5)
    for r in (victim, kept):
        worker.append(r.actor_id, r.namespace, r.id, at=read_at)
    tombstones.add(store, [victim])
    store.delete_many([victim.id])
    S3AccessLedger(state).erase([victim.id], actor_id=victim.actor_id)
    return worker, state, victim, kept


def test_a_throttled_tombstone_read_never_writes_an_erased_records_read(
    harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker flushes while the state table throttles its Query calls. What must hold:
    the flush fails as throttled (not silently), writes nothing and keeps both reads
    buffered; once the table is calm the next flush writes the kept record's read and never
    the erased one's."""
    worker, state, victim, kept = _erased_while_buffered(
        harness, tmp_path, monkeypatch, "st51x3-er-throttled"
    )
    state.ddb.meta.events.register_first("before-call.dynamodb.Query", _throttled)
    try:
        with pytest.raises(ClientError) as raised:
            worker.flush()
        assert is_throttling(raised.value)
    finally:
        state.ddb.meta.events.unregister("before-call.dynamodb.Query", _throttled)
    assert worker.pending == 2
    assert worker.flush() == 1
    assert S3AccessLedger(state).read().column("record_id").to_pylist() == [kept.id]


def test_a_calm_flush_leaves_the_erased_records_read_out(
    harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: the same flush on a calm table writes the kept record's read only."""
    worker, state, victim, kept = _erased_while_buffered(
        harness, tmp_path, monkeypatch, "st51x3-er-calm"
    )
    assert worker.flush() == 1
    assert S3AccessLedger(state).read().column("record_id").to_pylist() == [kept.id]
