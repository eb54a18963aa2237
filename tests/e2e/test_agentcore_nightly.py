"""The nightly APPLY run end to end on the AgentCore store (fake data plane behind real boto3,
moto DynamoDB sidecar): the same decisions, counts and final states as on SQLite, and what
the run does when AgentCore fails part of a batch, runs out of quota, or answers 404.

Cost: seeding goes through ``bulk_load`` (what ``put_many`` leaves behind, written directly:
``put_many`` costs ~30 ms a record under moto and is covered by the contract suite); the
runs themselves go through the store, call by call. Receipts and journals live on tmpfs
when there is one (a receipt is fsync'ed: ~7 ms each on disk).
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

from memlife.demo import generate
from memlife.journal import OpState
from memlife.journal.sqlite import SqliteJournal
from memlife.model import MemoryRecord, MemoryType, RetentionClass, Source, Status
from memlife.pipeline import RunConfig, RunSummary, run_local
from memlife.run_types import Shard
from memlife.stores.agentcore import AgentCoreStore, safe_value
from memlife.stores.sqlite import SqliteStore
from tests.fakes.agentcore import AgentCoreHarness, FakeAgentCore, bulk_load
from tests.support import run_secret
from tests.support.lifecycle import ANCHOR, CUTOFF, check_invariants, gate_cases, operation_receipts

KINDS = ("preferences", "episodes", "support")  # consolidation; expiry; holds + sensitive
N_RECORDS = 2000


# -- fixtures -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


def _fast_dir() -> Path:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return Path(tempfile.mkdtemp(prefix="memlife-ac-", dir=shm))
    return Path(tempfile.mkdtemp(prefix="memlife-ac-"))


@pytest.fixture()
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = _fast_dir()
    monkeypatch.setenv("MEMLIFE_HOME", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def store_url(h: AgentCoreHarness) -> str:
    query = {
        "region": "us-east-1",
        "endpoint_url": h.fake.endpoint_url,
        "sidecar_table": h.sidecar_table,
    }
    return f"agentcore://{h.fake.memory_id}?{urlencode(query)}"


@pytest.fixture()
def ac(harness: AgentCoreHarness, home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A fresh memory; runs open it by URL but share the harness's boto3 clients (~1 s saved
    per run). The equivalence test opens it the production way, clients and all."""
    store = harness.store()
    url = store_url(harness)

    def opener(u: str | None = None) -> AgentCoreStore:
        assert u == url, u
        s = AgentCoreStore.from_url(u, clients=harness.clients, retry_base_s=0.001)
        s.close = lambda: None  # type: ignore[method-assign]  # the clients are the harness's
        return s

    monkeypatch.setattr("memlife.pipeline.open_store", opener)
    return {
        "store": store,
        "fake": harness.fake,
        "url": url,
        "home": home,
        "receipts": home / "receipts",
        "sink": f"file://{home / 'receipts'}",
    }


def apply(env: dict[str, Any], now=CUTOFF, **kw: Any) -> RunSummary:
    return run_local(
        RunConfig(dry_run=False, now=now, store=env["url"], receipts=env["sink"], **kw)
    )


def snapshot(store: Any) -> dict[str, dict]:
    return {r.id: json.loads(r.to_json()) for r in store.iter_all()}


def report_rows(summary: RunSummary) -> dict[str, tuple]:
    rows = [json.loads(line) for line in Path(summary.report).read_text().splitlines()]
    out = {r["id"]: (r["action"], tuple(r["reasons"]), r["score"]) for r in rows}
    assert len(out) == len(rows), "a record was reported twice"
    return out


def receipt(summary: RunSummary) -> dict:
    assert summary.receipt is not None
    return json.loads(Path(summary.receipt).read_text())


def journal(env: dict[str, Any]) -> SqliteJournal:
    return SqliteJournal.at(env["home"] / "journal.db")


def expired(i: int, actor: str, *, days_past: float = 1, **kw: Any) -> MemoryRecord:
    """A hard-expired episodic record (deleted by the nightly run, no scoring involved)."""
    fields: dict[str, Any] = {
        "id": f"m-{actor}-{i:04d}",
        "actor_id": actor,
        "namespace": f"/users/{actor}/episodes",
        "memory_type": MemoryType.episodic,
        "content": f"Asked about order {i}.",
        "owner": "team-support",
        "source": Source.user_stated,
        "created_at": ANCHOR - timedelta(days=200),
        "expires_at": CUTOFF - timedelta(days=days_past),
    }
    fields.update(kw)
    return MemoryRecord(**fields)


def fresh(i: int, actor: str) -> MemoryRecord:
    return expired(
        i, actor, expires_at=None, created_at=ANCHOR - timedelta(days=2), id=f"k-{actor}-{i:04d}"
    )


def delete_receipts(env: dict[str, Any]) -> dict[str, dict]:
    """record id -> its delete receipt (exactly one per record, or the test fails)."""
    out: dict[str, dict] = {}
    for o in operation_receipts(env["receipts"]).values():
        if o["action"] == "delete":
            assert o["record_id"] not in out, f"two delete receipts for {o['record_id']}"
            out[o["record_id"]] = o
    return out


def present(fake: FakeAgentCore, rid: str) -> bool:
    return fake.record_by_memlife_id(rid) is not None


# -- (a) the same nightly run on SQLite and on AgentCore ---------------------------------------
def demo_records() -> list[MemoryRecord]:
    recs = [
        r
        for r in generate(3000, seed=11, anchor=ANCHOR, markers=True, per_actor=60)
        if r.namespace.rsplit("/", 1)[1] in KINDS
    ]
    return recs[:N_RECORDS]


def test_nightly_apply_matches_sqlite(
    harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = demo_records()
    assert len(records) == N_RECORDS
    assert {r.namespace.rsplit("/", 1)[1] for r in records} == set(KINDS)
    # the reference: SQLite
    ref = _fast_dir()
    ac_home = _fast_dir()
    try:
        monkeypatch.setenv("MEMLIFE_HOME", str(ref))
        db = SqliteStore(ref / "memlife.db")
        db.put_many(records)
        before = snapshot(db)
        db.close()
        run_secret.give(ref / "memlife.db")  # one secret, so replacement ids compare (50c2)
        cases = gate_cases(
            ref / "memlife.db", records
        )  # the gate is required: the same set for both
        sq = run_local(
            RunConfig(
                dry_run=False,
                now=CUTOFF,
                store=f"sqlite:///{ref / 'memlife.db'}",
                receipts=f"file://{ref / 'receipts'}",
                eval_cases=cases,
            )
        )
        db = SqliteStore(ref / "memlife.db")
        sq_after = snapshot(db)
        db.close()
        # AgentCore, opened by URL like production (own clients; the journal beside MEMLIFE_HOME)
        monkeypatch.setenv("MEMLIFE_HOME", str(ac_home))
        run_secret.give(ac_home / "journal.db")  # AgentCore's journal: the home's file
        store = harness.store()
        bulk_load(store, harness.fake, records)
        assert snapshot(store) == before, "AgentCore must read back exactly what SQLite holds"
        ac = run_local(
            RunConfig(
                dry_run=False,
                now=CUTOFF,
                store=store_url(harness),
                receipts=f"file://{ac_home / 'receipts'}",
                eval_cases=cases,
            )
        )
        ac_after = snapshot(store)

        # the run did real work of every kind, on both stores alike
        assert sq.status == ac.status == "success"
        life = sq.lifecycle
        assert life["processed"] == N_RECORDS
        assert min(life["deleted"], life["consolidated"], life["superseded"], life["held"]) > 0
        assert ac.lifecycle == sq.lifecycle
        assert ac.counts == sq.counts
        assert ac.records == sq.records and ac.shards == sq.shards
        # the same decisions: id, action, reasons, score
        sq_rows, ac_rows = report_rows(sq), report_rows(ac)
        assert len(sq_rows) == N_RECORDS
        assert ac_rows == sq_rows
        # the same final store: survivors, status, replaced_by (replacement ids are deterministic)
        assert set(ac_after) == set(sq_after)
        assert {i: (r["status"], r["provenance"]["replaced_by"]) for i, r in ac_after.items()} == {
            i: (r["status"], r["provenance"]["replaced_by"]) for i, r in sq_after.items()
        }
        assert ac_after == sq_after  # and every other field too
        assert {r["status"] for r in ac_after.values()} >= {"active", "superseded"}
        assert len(set(before) - set(ac_after)) == life["deleted"]
        # the same operations, receipted; DESIGN.md invariants hold on the AgentCore side
        ops_ac = operation_receipts(ac_home / "receipts")

        # two stores are two runs (the run key holds the store's identity): compare what was done
        def done(ops: dict) -> set:
            return {(o["record_id"], o["action"], o["outcome"]) for o in ops.values()}

        assert done(ops_ac) == done(operation_receipts(ref / "receipts"))
        assert not set(ops_ac) & set(operation_receipts(ref / "receipts"))
        assert len(ops_ac) == life["deleted"] + life["superseded"] + life["consolidated"]
        check_invariants(before, ac_after, ac_home / "receipts")
        journal_ac = SqliteJournal.at(ac_home / "journal.db")
        assert journal_ac.due(CUTOFF) == []
        assert {o.state for o in journal_ac.by_run(ac.run_id)} == {OpState.RECEIPTED}
        # AgentCore was asked within its limits
        fake = harness.fake
        for op in ("create", "update", "delete"):
            assert fake.ops(op) and all(len(p["records"]) <= 100 for p in fake.ops(op)), op
        assert all(p["maxResults"] <= 100 for p in fake.ops("ListMemoryRecords"))
    finally:
        shutil.rmtree(ref, ignore_errors=True)
        shutil.rmtree(ac_home, ignore_errors=True)


# -- (b) 3 of 100 deletes fail ------------------------------------------------------------------
def test_three_of_a_hundred_deletes_fail_then_the_retry_queue_completes_them(ac: dict) -> None:
    store, fake = ac["store"], ac["fake"]
    actor = "u-000001"
    doomed_all = [expired(i, actor) for i in range(100)]
    bulk_load(store, fake, doomed_all + [fresh(i, actor) for i in range(5)])
    ids = [r.id for r in doomed_all]
    bad = [ids[7], ids[42], ids[99]]
    fake.fail_next_deletes(bad, 500)

    first = apply(ac)
    assert first.status == "partial_failure"
    assert first.lifecycle["deleted"] == 97 and first.lifecycle["failed"] == 3
    deletes = fake.ops("delete")
    assert [len(p["records"]) for p in deletes] == [100], "one batch of 100"
    got = delete_receipts(ac)
    assert set(got) == set(ids) - set(bad)
    assert all(o["outcome"] == "deleted" for o in got.values())
    rec = receipt(first)
    assert rec["status"] == "partial_failure"
    assert sorted(f["record_id"] for f in rec["failures"]) == sorted(bad)
    assert all(
        f["code"] == "SERVICE" and f["retryable"] and f["next_retry_at"] for f in rec["failures"]
    )
    assert {i["id"] for i in rec["ids_not_deleted"]} == set(bad)
    assert rec["next_retry_at"] == min(f["next_retry_at"] for f in rec["failures"])
    assert all(present(fake, i) for i in bad) and not any(present(fake, i) for i in got)
    failed_ops = [o for o in journal(ac).by_run(first.run_id) if o.state is OpState.FAILED]
    assert sorted(o.record_id for o in failed_ops) == sorted(bad)
    assert all(o.next_retry_at and o.next_retry_at > CUTOFF and o.attempts == 1 for o in failed_ops)

    # not due yet: a retry-only run a minute later leaves them queued
    soon = apply(ac, now=CUTOFF + timedelta(minutes=1), retry_only=True)
    assert (
        soon.status == "success"
        and soon.lifecycle["deleted"] == 0
        and soon.lifecycle["failed"] == 0
    )
    assert all(present(fake, i) for i in bad) and len(fake.ops("delete")) == 1

    # the next night drains the queue first; nothing is planned twice, each failure counted once
    later = apply(ac, now=CUTOFF + timedelta(days=1))
    assert later.status == "success"
    # the three are the earlier run's operations: counted in this run's retry-queue counts
    assert later.other["retry_queue_deleted"] == 3 and later.lifecycle["failed"] == 0
    assert not any(present(fake, i) for i in ids)
    assert sum(len(p["records"]) for p in fake.ops("delete")) == 103  # 100 + the 3 retried
    got = delete_receipts(ac)
    assert set(got) == set(ids)
    assert all(
        got[i]["outcome"] == "deleted"
        and got[i]["run_id"] == first.run_id
        and got[i]["attempts"] == 2
        for i in bad
    )
    assert receipt(later)["failures"] == []
    assert all(o.state is OpState.RECEIPTED for o in journal(ac).by_run(first.run_id))
    assert all(store.get(r.id) is not None for r in (fresh(i, actor) for i in range(5)))


# -- (c) ServiceQuotaExceeded during a shard ----------------------------------------------------
def test_quota_exceeded_stops_the_shard_and_the_others_complete(ac: dict) -> None:
    store, fake = ac["store"], ac["fake"]
    sizes = {"u-a": 30, "u-b": 150, "u-c": 30}  # u-b: two delete batches (100 + 50)
    recs = {a: [expired(i, a) for i in range(n)] for a, n in sizes.items()}
    bulk_load(store, fake, [r for rs in recs.values() for r in rs])
    fake.quota_next(1, "delete", skip=1)  # shards are deleted in order: u-a, then u-b's first batch

    first = apply(ac)
    assert first.status == "partial_failure"
    rec = receipt(first)
    stopped = Shard("u-b", "/users/u-b/episodes").failed("QUOTA_EXCEEDED")
    assert rec["shards"]["failed"] == [stopped]
    assert first.failed_shards == [stopped]
    assert rec["pagination_complete"] is False and rec["status"] == "partial_failure"
    # the other shards completed, receipted
    got = delete_receipts(ac)
    assert set(got) == {r.id for a in ("u-a", "u-c") for r in recs[a]}
    assert first.lifecycle["deleted"] == 60
    # the stopped shard: its refused batch is queued, its second batch never sent
    b_ids = {r.id for r in recs["u-b"]}
    assert all(present(fake, i) for i in b_ids)
    sent_b = [
        p
        for p in fake.ops("delete")
        if any(
            fake.records.get(x["memoryRecordId"], {}).get("namespaces") == ["/users/u-b/episodes"]
            for x in p["records"]
        )
    ]
    assert [len(p["records"]) for p in sent_b] == [100], "after the quota error the shard stops"
    assert len(fake.ops("delete")) == 3
    assert first.lifecycle["failed"] == 100
    assert {f["code"] for f in rec["failures"]} == {"QUOTA_EXCEEDED"}
    not_deleted = {i["id"]: i["reason"] for i in rec["ids_not_deleted"]}
    assert set(not_deleted) == b_ids
    assert sorted(not_deleted.values()).count("SHARD_STOPPED") == 50

    # the next night: the queue (100) and a fresh plan (50) finish the shard
    later = apply(ac, now=CUTOFF + timedelta(days=1))
    assert later.status == "success" and later.failed_shards == []
    # 50 planned tonight (this run's own), 100 of the earlier run finished by the retry queue
    assert later.lifecycle["deleted"] == 50 and later.other["retry_queue_deleted"] == 100
    assert later.lifecycle["failed"] == 0
    assert not any(present(fake, i) for i in b_ids)
    assert set(delete_receipts(ac)) == {r.id for rs in recs.values() for r in rs}


def test_a_quota_stop_after_part_of_a_batch_keeps_what_was_done(ac: dict) -> None:
    """AgentCore deletes most of a batch and throttles a few; the retry of those hits the
    quota. What it did delete is journaled and receipted ``deleted`` tonight (before: the
    whole batch was journaled failed and the next night receipted those records
    ``already_absent``, as if someone else had deleted them); the throttled ones wait for
    the next night, which deletes them."""
    store, fake = ac["store"], ac["fake"]
    recs = [expired(i, "u-q") for i in range(30)]
    bulk_load(store, fake, recs)
    throttled = {r.id for r in recs[:4]}
    fake.fail_next_deletes(throttled, 429)
    fake.quota_next(1, "delete", skip=1)  # the request retrying the throttled four

    first = apply(ac)
    assert first.failed_shards == [Shard("u-q", "/users/u-q/episodes").failed("QUOTA_EXCEEDED")]
    assert first.lifecycle["deleted"] == 26 and first.lifecycle["failed"] == 4
    got = delete_receipts(ac)
    assert set(got) == {r.id for r in recs} - throttled
    assert {o["outcome"] for o in got.values()} == {"deleted"}
    assert all(present(fake, i) for i in throttled)
    assert not any(present(fake, r.id) for r in recs if r.id not in throttled)
    assert {f["code"] for f in receipt(first)["failures"]} == {"QUOTA_EXCEEDED"}

    later = apply(ac, now=CUTOFF + timedelta(days=1))
    assert later.status == "success" and later.other["retry_queue_deleted"] == 4
    got = delete_receipts(ac)
    assert set(got) == {r.id for r in recs}
    assert {o["outcome"] for o in got.values()} == {"deleted"}, "each deletion claimed once"
    assert not any(present(fake, r.id) for r in recs)


def test_an_erasure_stopped_by_the_quota_part_way_keeps_what_it_erased(ac: dict) -> None:
    """The same stop inside an erasure: what AgentCore deleted is receipted ``deleted`` by
    this erasure; the rest is erased when the erasure is run again."""
    from memlife.erase import erase

    store, fake = ac["store"], ac["fake"]
    recs = [expired(i, "u-e", days_past=-30, subject="pets") for i in range(12)]
    bulk_load(store, fake, recs)
    throttled = {r.id for r in recs[:3]}
    fake.fail_next_deletes(throttled, 429)
    fake.quota_next(1, "delete", skip=1)
    first = erase(store, "u-e", subject="pets", receipts=ac["sink"], now=CUTOFF)
    erased = {o["record_id"]: o["outcome"] for o in operation_receipts(ac["receipts"]).values()}
    assert erased == {r.id: "deleted" for r in recs if r.id not in throttled}, first
    assert all(present(fake, i) for i in throttled)
    again = erase(store, "u-e", subject="pets", receipts=ac["sink"], now=CUTOFF)
    erased = {o["record_id"]: o["outcome"] for o in operation_receipts(ac["receipts"]).values()}
    assert erased == {r.id: "deleted" for r in recs}, again
    assert not any(present(fake, r.id) for r in recs)


# -- (d) ResourceNotFound on delete = already deleted -------------------------------------------
@pytest.mark.parametrize("answer", ["item", "request"])
def test_not_found_on_delete_counts_as_already_deleted(ac: dict, answer: str) -> None:
    """``item``: a per-item 404 in BatchDelete; ``request``: the whole request fails with
    ResourceNotFoundException (the adapter bisects down to the record)."""
    store, fake = ac["store"], ac["fake"]
    fake.missing_deletes = answer
    actor = "u-000002"
    recs = [expired(i, actor) for i in range(20)]
    bulk_load(store, fake, recs)
    ids = [r.id for r in recs]
    vanish, flaky = ids[3:5], ids[10]
    fake.fail_next_deletes([flaky], 503)

    def behind_our_back(ctx: Any, st: Any, items: Any) -> dict:
        """After planning, before deleting: AgentCore drops two records itself (e.g. TTL)."""
        assert {i.id for i in items} == set(ids)
        with fake.lock:
            for rid in vanish:
                del fake.records[fake.record_by_memlife_id(rid)["memoryRecordId"]]
        return {"blocked": False}

    first = run_local(
        RunConfig(dry_run=False, now=CUTOFF, store=ac["url"], receipts=ac["sink"]),
        gate=behind_our_back,
    )
    assert first.lifecycle["failed"] == 1, "the 404s are not failures; the 503 is"
    assert first.lifecycle["deleted"] == 19
    got = delete_receipts(ac)
    assert set(got) == set(ids) - {flaky}
    assert {got[i]["outcome"] for i in vanish} <= {"deleted", "already_absent"}
    assert all(store.sidecar.get(safe_value(i)) is None for i in vanish), "sidecar items dropped"
    if answer == "request":
        assert any(len(p["records"]) == 1 for p in fake.ops("delete")), "bisected to the record"

    # the failed one vanishes too before its retry: done, not failed, receipted as such
    with fake.lock:
        del fake.records[fake.record_by_memlife_id(flaky)["memoryRecordId"]]
    later = apply(ac, now=CUTOFF + timedelta(days=1), retry_only=True)
    assert later.status == "success" and later.lifecycle["failed"] == 0
    assert later.other["retry_queue_already_absent"] == 1  # the earlier run's operation
    got = delete_receipts(ac)
    assert set(got) == set(ids) and got[flaky]["outcome"] == "already_absent"
    assert receipt(first)["failures"][0]["record_id"] == flaky and receipt(later)["failures"] == []
    assert not [i for i in ids if present(fake, i)] and store.get(flaky) is None


def test_legal_hold_on_agentcore_is_never_deleted(ac: dict) -> None:
    """Expired but held: retained, untouched, and the deferral recorded (invariant 1)."""
    store, fake = ac["store"], ac["fake"]
    actor = "u-000003"
    held = [expired(i, actor, retention_class=RetentionClass.legal_hold) for i in range(3)]
    gone = [expired(i + 10, actor) for i in range(3)]
    bulk_load(store, fake, held + gone)
    before = {r.id: store.get(r.id) for r in held}
    summary = apply(ac)
    assert summary.status == "success" and summary.lifecycle["deleted"] == 3
    assert {r.id: store.get(r.id) for r in held} == before
    assert {i["id"]: i["reason"] for i in receipt(summary)["ids_not_deleted"]} == {
        r.id: "LEGAL_HOLD" for r in held
    }


def test_reads_through_a_stale_location_fall_back_to_the_sidecar(
    harness: AgentCoreHarness, ac: dict
) -> None:
    """The store remembers where records live (listings, reads, writes) and reads them with
    one GetMemoryRecord; another writer deleting, moving or re-creating a record behind its
    back must never make it answer with a stale or missing record."""
    ours, fake = ac["store"], ac["fake"]
    other = AgentCoreStore.from_url(ac["url"], clients=harness.clients)
    recs = [expired(i, "u-000004", expires_at=None) for i in range(3)]
    bulk_load(ours, fake, recs)
    assert [r.id for r in ours.page("u-000004", recs[0].namespace).records]  # locations learnt
    calls = len(fake.requests)
    assert ours.get(recs[0].id) == recs[0]
    assert len(fake.requests) == calls + 1, "a known location costs one GetMemoryRecord"
    # updated elsewhere: the answer is AgentCore's current record
    other.put_many([recs[0].model_copy(update={"content": "Asked about order 0, twice."})])
    assert ours.get(recs[0].id).content == "Asked about order 0, twice."  # type: ignore[union-attr]
    # deleted and re-created elsewhere (a new memoryRecordId)
    other.delete_many([recs[1].id])
    assert ours.get(recs[1].id) is None
    other.put_many([recs[1]])
    assert ours.get(recs[1].id) == recs[1]
    # moved to another namespace elsewhere
    moved = recs[2].model_copy(update={"namespace": "/users/u-000004/archive"})
    other.put_many([moved])
    assert ours.get_many([recs[2].id]) == {recs[2].id: moved}
    # and a status change through our store still sees the current version (no CONFLICT)
    res = ours.set_status([r.id for r in recs], Status.quarantined)
    assert sorted(res.succeeded) == sorted(r.id for r in recs) and not res.failed


def test_a_catch_up_runs_supersedes_keep_their_originals_on_agentcore(ac: dict) -> None:
    """The journal of a store that is not SQLite lives in the home (its own file): planning
    reads the supersede's wall-clock time there, read-only (memlife/superseded_since.py),
    as tests/e2e/test_catch_up_retention.py shows on SQLite."""
    from memlife.model import utcnow
    from tests.support.gate import rec
    from tests.unit.test_gate_staged import policy_with

    store, fake = ac["store"], ac["fake"]
    catch_up = utcnow() - timedelta(days=200)

    def said(r: MemoryRecord, days_before: float) -> MemoryRecord:
        t = catch_up - timedelta(days=days_before)
        return r.model_copy(update={"created_at": t, "last_verified_at": t})

    bulk_load(store, fake, [
        said(rec("m-tea", "preferences", "Drinks only green tea, never coffee.",
                 subject="beverage"), 100),
        said(rec("m-coffee", "preferences", "Switched to black coffee; no longer drinks tea.",
                 subject="beverage"), 10),
    ])  # fmt: skip
    policy = policy_with(ac["home"], required=False)
    apply(ac, now=catch_up, policy=policy)
    assert store.get("m-tea").status is Status.superseded  # type: ignore[union-attr]
    night = apply(ac, now=utcnow(), policy=policy)
    assert night.lifecycle["deleted"] == 0 and present(fake, "m-tea")
    j = journal(ac)  # 91 days of real time pass: the standard class's 90 are over
    with j.lock:
        j.connection.execute(
            "UPDATE operations SET updated_at=? WHERE kind='supersede'",
            ((utcnow() - timedelta(days=91)).isoformat(),),
        )
        j.connection.commit()
    later = apply(ac, now=utcnow(), policy=policy)
    assert later.lifecycle["deleted"] >= 1 and not present(fake, "m-tea")
