"""Audit 53ii: the AgentCore store as the service answers it (a throttled sidecar clean-up
after a delete; a listing that serves a record twice or hands back an earlier cursor).

(1) ``ChunkWriter.delete`` asks AgentCore to delete, then drops the records' sidecar items.
When that DeleteItem is throttled past botocore's attempts (DynamoDB's answer, as
audit 52ii2 throttled the PutItem), the StoreError left without the batch's outcome: the
night journaled every record it had just deleted FAILED (``deleted: 0, failed: 3``) and
the next night's retry queue receipted them ``already_absent``. Records memlife deleted,
claimed by no ``deleted`` receipt (the class of the session 9 row).

(2) ``page`` / ``iter_shard`` / ``iter_all`` take the service's pages as they come. A
record listed on two pages (a cursor that moved under a concurrent write; nothing in
AgentCore's documentation promises the keyset order the fake keeps) was planned twice:
the night planned its delete twice in one batch and crashed with ``JournalStateError``
(APPLIED -> APPLIED) after deleting it, before any later shard; and a ``nextToken`` the
service had already handed out (A, B, A, ...: not the one just sent, which audit 49ii
refuses) made every reader page for ever.

AgentCore is the HTTP fake behind the real boto3 client, DynamoDB is moto; the throttle is
a ``before-call`` handler answering DynamoDB's own error, and the listings are the fake's
answers rewritten at its HTTP handler (the network boundary).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from botocore.awsrequest import AWSResponse

from memlife.model import MemoryRecord, MemoryType, Source
from memlife.pipeline import RunConfig, RunSummary, run_local
from memlife.stores.agentcore import AgentCoreStore
from memlife.stores.base import StoreError, iter_shard
from tests.fakes.agentcore import AgentCoreHarness, FakeAgentCore, bulk_load
from tests.support.lifecycle import ANCHOR, CUTOFF, gate_cases, operation_receipts

NS = "/users/u-1/episodes"


def episode(k: int, *, expired: bool = False) -> MemoryRecord:
    return MemoryRecord(
        id=f"e-{k:03d}", actor_id="u-1", namespace=NS, memory_type=MemoryType.episodic,
        subject=f"trip {k}", source=Source.user_stated, owner="team-travel",
        content=f"Went to place number {k}.", created_at=ANCHOR - timedelta(days=5),
        expires_at=CUTOFF - timedelta(days=1) if expired else None,
    )  # fmt: skip


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


@pytest.fixture
def env(harness: AgentCoreHarness, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A fresh memory, a home of its own; runs open the store by URL on the harness's
    clients (as tests/e2e/test_agentcore_nightly.py does)."""
    shm = Path("/dev/shm")
    where = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    home = Path(tempfile.mkdtemp(prefix="memlife-a53ii-", dir=where))
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    store = harness.store()
    query = {"region": "us-east-1", "endpoint_url": harness.fake.endpoint_url,
             "sidecar_table": harness.sidecar_table}  # fmt: skip
    url = f"agentcore://{harness.fake.memory_id}?{urlencode(query)}"

    def opener(u: str | None = None) -> AgentCoreStore:
        s = AgentCoreStore.from_url(str(u), clients=harness.clients, retry_base_s=0.001)
        s.close = lambda: None  # type: ignore[method-assign]  # the harness's clients
        return s

    monkeypatch.setattr("memlife.pipeline.open_store", opener)
    yield {"store": store, "fake": harness.fake, "url": url, "home": home,
           "sink": f"file://{home / 'receipts'}"}  # fmt: skip
    shutil.rmtree(home, ignore_errors=True)


def night(env: dict[str, Any], days: int = 0, cases: str | None = None) -> RunSummary:
    config = RunConfig(dry_run=False, now=CUTOFF + timedelta(days=days), store=env["url"],
                       receipts=env["sink"], eval_cases=cases)  # fmt: skip
    return run_local(config, gate=lambda *a: {"blocked": False})


def receipts_of(env: dict[str, Any]) -> dict[str, list[str]]:
    """Record id -> the outcomes its operation receipts claim."""
    out: dict[str, list[str]] = {}
    for o in operation_receipts(env["home"] / "receipts").values():
        out.setdefault(o["record_id"], []).append(o["outcome"])
    return out


# -- (1) the sidecar's clean-up throttled after AgentCore deleted ----------------------------
class DeleteItemThrottle:
    """Answers the sidecar's DeleteItem calls with DynamoDB's throttling error, as botocore
    raises it once its own attempts are spent."""

    def __init__(self) -> None:
        self.thrown = 0

    def __call__(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        self.thrown += 1
        parsed = {"Error": {"Code": "ProvisionedThroughputExceededException",
                            "Message": "Rate exceeded"},
                  "ResponseMetadata": {"HTTPStatusCode": 400}}  # fmt: skip
        return AWSResponse("https://dynamodb", 400, {}, None), parsed


def _delete_with_cleanup_throttled(store: AgentCoreStore, ids: list[str]) -> StoreError:
    throttle = DeleteItemThrottle()
    events = store.sidecar.client.meta.events
    events.register_first("before-call.dynamodb.DeleteItem", throttle)
    try:
        with pytest.raises(StoreError) as raised:
            store.delete_many(ids)
    finally:
        events.unregister("before-call.dynamodb.DeleteItem", throttle)
    assert throttle.thrown >= 1, "the throttle never fired"
    return raised.value


def test_a_throttled_cleanup_still_says_what_agentcore_deleted(env: dict[str, Any]) -> None:
    store, fake = env["store"], env["fake"]
    recs = [episode(k) for k in range(3)]
    bulk_load(store, fake, recs)
    exc = _delete_with_cleanup_throttled(store, [r.id for r in recs])
    assert len(fake.records) == 0  # AgentCore deleted all three
    partial = getattr(exc, "partial", None)  # what the appliers journal (until_stopped)
    assert partial is not None and sorted(partial.succeeded) == [r.id for r in recs]


def test_a_night_whose_cleanup_is_throttled_receipts_its_deletes(env: dict[str, Any]) -> None:
    """Three expired records: night 1 deletes them while the sidecar's clean-up is
    throttled, night 2 runs calm. Each deletion is claimed by a ``deleted`` receipt (before:
    night 1 said deleted 0, failed 3; night 2 receipted all three already_absent)."""
    store, fake = env["store"], env["fake"]
    recs = [episode(k, expired=True) for k in range(3)] + [episode(9)]
    bulk_load(store, fake, recs)
    throttle = DeleteItemThrottle()
    events = store.sidecar.client.meta.events
    events.register_first("before-call.dynamodb.DeleteItem", throttle)
    try:
        first = night(env)
    finally:
        events.unregister("before-call.dynamodb.DeleteItem", throttle)
    assert throttle.thrown >= 1
    assert len(fake.records) == 1  # AgentCore deleted the three
    night(env, days=1)
    got = receipts_of(env)
    assert {r.id: got.get(r.id) for r in recs[:3]} == {r.id: ["deleted"] for r in recs[:3]}
    assert first.lifecycle["deleted"] == 3 and first.lifecycle["failed"] == 0


def test_control_a_calm_night_receipts_its_deletes(env: dict[str, Any]) -> None:
    store, fake = env["store"], env["fake"]
    recs = [episode(k, expired=True) for k in range(3)] + [episode(9)]
    bulk_load(store, fake, recs)
    first = night(env)
    assert first.lifecycle["deleted"] == 3 and first.lifecycle["failed"] == 0
    got = receipts_of(env)
    assert {r.id: got.get(r.id) for r in recs[:3]} == {r.id: ["deleted"] for r in recs[:3]}
    assert store.sidecar.get_many([r.id for r in recs[:3]]) == {}  # the items went too


# -- (2) a listing that serves a record twice, or an earlier cursor ---------------------------
def serve_twice(fake: FakeAgentCore, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """ListMemoryRecords of NS: each page after the first opens with the first page's
    records again (a cursor that moved back under a concurrent write)."""
    real = fake._op_ListMemoryRecords
    served = {"again": 0}

    def answer(body: dict, query: dict, groups: tuple) -> tuple[int, dict]:
        status, out = real(body, query, groups)
        if body.get("namespace") == NS and body.get("nextToken"):
            first = real({k: v for k, v in body.items() if k != "nextToken"}, query, groups)[1]
            out["memoryRecordSummaries"] = (
                first["memoryRecordSummaries"] + out["memoryRecordSummaries"]
            )
            served["again"] += 1
        return status, out

    monkeypatch.setattr(fake, "_op_ListMemoryRecords", answer)
    return served


def hand_back_an_earlier_cursor(
    fake: FakeAgentCore, monkeypatch: pytest.MonkeyPatch, bound: int = 60
) -> dict[str, int]:
    """ListMemoryRecords of NS: the page after the second carries the first page's
    ``nextToken`` (A, B, A, B, ...: never the token just sent), and a token is answered
    as it was the first time. ``bound``: past this many calls the listing ends, so the
    current code's endless paging ends in a test failure instead of a hang."""
    real = fake._op_ListMemoryRecords
    issued: list[str] = []
    answers: dict[str | None, dict] = {}
    calls = {"n": 0}

    def answer(body: dict, query: dict, groups: tuple) -> tuple[int, dict]:
        if body.get("namespace") != NS or body.get("metadataFilters"):
            return real(body, query, groups)
        calls["n"] += 1
        sent = body.get("nextToken")
        if sent not in answers:
            out = real(body, query, groups)[1]
            if out.get("nextToken"):
                issued.append(out["nextToken"])
            if len(issued) >= 2 and sent == issued[1]:
                out["nextToken"] = issued[0]
            answers[sent] = out
        out = json.loads(json.dumps(answers[sent]))
        if calls["n"] >= bound:
            out.pop("nextToken", None)
        return 200, out

    monkeypatch.setattr(fake, "_op_ListMemoryRecords", answer)
    return calls


def test_a_record_listed_twice_is_paged_once(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, fake = env["store"], env["fake"]
    recs = [episode(k) for k in range(250)]
    bulk_load(store, fake, recs)
    served = serve_twice(fake, monkeypatch)
    ids = [r.id for p in iter_shard(store, "u-1", NS, page_size=120) for r in p.records]
    assert served["again"] >= 1
    assert sorted(ids) == sorted(r.id for r in recs)  # each once
    exported = [r.id for r in store.iter_all()]
    assert sorted(exported) == sorted(r.id for r in recs)


def test_a_night_over_a_listing_that_repeats_a_record(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """150 records, three expired; the listing repeats its first page. The night deletes
    the three once each and counts 150 processed (before: JournalStateError, APPLIED ->
    APPLIED, after the delete, every later shard left undone)."""
    store, fake = env["store"], env["fake"]
    recs = [episode(k, expired=k < 3) for k in range(150)]
    bulk_load(store, fake, recs)
    cases = gate_cases(env["home"] / "x.db", recs)
    serve_twice(fake, monkeypatch)
    summary = night(env, cases=cases)
    assert summary.status == "success", summary.status
    assert summary.lifecycle["processed"] == 150
    assert summary.lifecycle["deleted"] == 3
    got = receipts_of(env)
    assert {r.id: got.get(r.id) for r in recs[:3]} == {r.id: ["deleted"] for r in recs[:3]}


def test_an_earlier_cursor_handed_back_is_refused(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, fake = env["store"], env["fake"]
    bulk_load(store, fake, [episode(k) for k in range(250)])
    calls = hand_back_an_earlier_cursor(fake, monkeypatch)
    with pytest.raises(StoreError) as raised:
        for _ in iter_shard(store, "u-1", NS, page_size=100):
            pass
    assert "nextToken" in str(raised.value) and calls["n"] < 60
    calls["n"] = 0
    with pytest.raises(StoreError):
        for _ in store.iter_all():
            pass
    assert calls["n"] < 60


def test_control_a_plain_listing_pages_each_record_once(env: dict[str, Any]) -> None:
    store, fake = env["store"], env["fake"]
    recs = [episode(k) for k in range(250)]
    bulk_load(store, fake, recs)
    ids = [r.id for p in iter_shard(store, "u-1", NS, page_size=120) for r in p.records]
    assert sorted(ids) == sorted(r.id for r in recs)
    assert sorted(r.id for r in store.iter_all()) == sorted(r.id for r in recs)
