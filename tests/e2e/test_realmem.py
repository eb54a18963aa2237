"""Memories as agents write them: no subject, no owner, agent-inferred; review as a workflow.

End to end through `remember`, the nightly apply run (run_local) and `recall`, with the
real MiniLM embedder; the model is the real SDK against the local Messages API server,
scripted with realistic answers (wrong ones included).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.consolidate.prompts import TOOL_NAME
from memlife.embed import default_embedder
from memlife.group import InferenceItem, infer_subjects
from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, Source, Status
from memlife.online.memory import LongTermMemory
from memlife.pipeline import RunConfig, run_local
from memlife.review_queue import ReviewQueue
from memlife.stores.sqlite import SqliteStore
from memlife.text import negates, norm_sha256
from tests.fakes.messages_api import MessagesServer, tool_use_reply

DAY1 = datetime(2026, 1, 5, 8, tzinfo=UTC)
DAY40 = DAY1 + timedelta(days=39)
NIGHT = DAY40 + timedelta(days=1)
COFFEE = "I drink a large black coffee every morning."
TEA = "I gave up coffee in October; my mornings are green tea now."
# not an enforced namespace: without an evaluation set the gate lets nothing be superseded
# where deletion is enforced (DESIGN step 8); the offline pair item does not depend on it
ACTOR, NS = "u-7", "/users/u-7/notes"
RECORD = re.compile(r'<(memory_\w+) id="([^"]+)"[^>]*>\n(.*?)\n</\1>', re.S)


@pytest.fixture(scope="module")
def embedder():
    return default_embedder()


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("MEMLIFE_HOME", str(h))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    h.mkdir()
    return h


def _remember_coffee(home: Path, embedder) -> tuple[str, str]:
    store = SqliteStore(home / "memlife.db")
    try:
        mem = LongTermMemory(store, embedder=embedder, ledger=AccessLedger(home / "ledger"))
        a = mem.remember(ACTOR, NS, None, COFFEE, at=DAY1).record_id
        b = mem.remember(ACTOR, NS, None, TEA, at=DAY40).record_id
        mem.close()
        return a, b
    finally:
        store.close()


def _records(home: Path) -> dict[str, MemoryRecord]:
    store = SqliteStore(home / "memlife.db")
    try:
        return {r.id: r for r in store.iter_all()}
    finally:
        store.close()


def _recall(home: Path, embedder, query: str) -> list[str]:
    store = SqliteStore(home / "memlife.db")
    try:
        mem = LongTermMemory(store, embedder=embedder, ledger=AccessLedger(home / "ledger"))
        return [h.record.content for h in mem.recall(ACTOR, query, k=3)]
    finally:
        store.close()


# -- offline: a probable update is one pair item, never superseded on cosine ----------------
def test_offline_coffee_to_tea_is_one_possible_update_pair(home: Path, embedder) -> None:
    old, new = _remember_coffee(home, embedder)
    summary = run_local(RunConfig(dry_run=False, now=NIGHT))
    assert summary.status == "success"
    recs = _records(home)
    assert recs[old].status is Status.active and recs[new].status is Status.active  # untouched
    assert summary.lifecycle["superseded"] == 0
    res = CliRunner().invoke(app, ["review", "list", "--json"])
    assert res.exit_code == 0, res.output
    items = json.loads(res.stdout)
    assert [(i["record_id"], i["pair_id"], i["reason"]) for i in items] == [
        (old, new, "POSSIBLE_UPDATE")
    ]
    # a second night carries the open item, it does not queue it again
    run_local(RunConfig(dry_run=False, now=NIGHT + timedelta(days=1)))
    again = json.loads(CliRunner().invoke(app, ["review", "list", "--json"]).stdout)
    assert (
        len(again) == 1 and again[0]["nights"] == 2 and again[0]["item_id"] == items[0]["item_id"]
    )
    # the reviewer supersedes the older by the newer: receipted with the reviewer's identity
    res = CliRunner().invoke(app, ["review", "resolve", items[0]["item_id"], "--decision", "supersede",
                                   "--reviewer", "ana@example.com", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    receipt = json.loads(
        (
            home / "receipts" / "operations" / f"{out['operations'][0]['operation_id']}.json"
        ).read_text()
    )
    assert receipt["reviewer_identity"] == "ana@example.com" and receipt["action"] == "supersede"
    recs = _records(home)
    assert recs[old].status is Status.superseded and recs[old].provenance.replaced_by == new
    assert _recall(home, embedder, "What do I drink in the morning?")[0] == TEA
    assert json.loads(CliRunner().invoke(app, ["review", "list", "--json"]).stdout) == []


# -- with the model: structured output decides, grounding catches wrong answers ------------
def _pair(body: dict[str, Any]) -> dict[str, str]:
    text = body["messages"][0]["content"]
    text = text if isinstance(text, str) else "".join(b.get("text", "") for b in text)
    return {rid: content for _, rid, content in RECORD.findall(text)}


def careful(body: dict[str, Any]):
    recs = _pair(body)
    (old, _), (_, newer) = list(recs.items())[0], list(recs.items())[-1]
    return tool_use_reply(TOOL_NAME, {
        "summary": newer, "claims": [newer], "dropped_claims": [recs[old]], "confidence": 0.9,
        "source_ids": sorted(recs), "relation": "update", "outdated_ids": [old],
    })  # fmt: skip


def keeps_the_old_fact(body: dict[str, Any]):
    recs = _pair(body)
    old = next(iter(recs))
    return tool_use_reply(TOOL_NAME, {
        "summary": recs[old], "claims": [recs[old]], "confidence": 0.8,
        "source_ids": sorted(recs), "relation": "duplicate",
    })  # fmt: skip


def backwards_update(body: dict[str, Any]):
    recs = _pair(body)
    old, new = list(recs)[0], list(recs)[-1]
    return tool_use_reply(TOOL_NAME, {
        "summary": recs[old], "claims": [recs[old]], "confidence": 0.8,
        "source_ids": sorted(recs), "relation": "update", "outdated_ids": [new],
    })  # fmt: skip


def invents_a_date(body: dict[str, Any]):
    recs = _pair(body)
    return tool_use_reply(TOOL_NAME, {
        "summary": "Since 14 October 2025 my mornings are green tea.", "claims": ["Green tea since 2025."],
        "confidence": 0.9, "source_ids": sorted(recs), "relation": "update",
        "outdated_ids": [next(iter(recs))],
    })  # fmt: skip


def complement(body: dict[str, Any]):
    recs = _pair(body)
    return tool_use_reply(TOOL_NAME, {
        "summary": " ".join(recs.values()), "claims": list(recs.values()), "confidence": 0.7,
        "source_ids": sorted(recs), "relation": "complement",
    })  # fmt: skip


@pytest.fixture()
def model(
    home: Path, monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer
) -> MessagesServer:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    return messages_server


def test_with_model_the_newer_fact_wins_and_the_older_is_superseded(home, embedder, model) -> None:
    old, new = _remember_coffee(home, embedder)
    model.set_handler(careful)
    summary = run_local(RunConfig(dry_run=False, now=NIGHT))
    assert summary.status == "success" and summary.model["calls"] == 1
    recs = _records(home)
    assert recs[old].status is Status.superseded and recs[new].status is Status.superseded
    replacement = recs[recs[old].provenance.replaced_by]
    assert replacement.status is Status.active and replacement.content == TEA
    hits = _recall(home, embedder, "What do I drink in the morning?")
    assert hits[0] == TEA and COFFEE not in hits


@pytest.mark.parametrize(
    "answer", [keeps_the_old_fact, backwards_update, invents_a_date, complement]
)
def test_with_model_a_wrong_or_keep_apart_answer_changes_nothing(
    home, embedder, model, answer
) -> None:
    old, new = _remember_coffee(home, embedder)
    model.set_handler(answer)
    summary = run_local(RunConfig(dry_run=False, now=NIGHT))
    recs = _records(home)
    assert recs[old].status is Status.active and recs[new].status is Status.active
    assert summary.lifecycle["superseded"] == 0 and summary.lifecycle["consolidated"] == 0
    assert sum(summary.model["rejections"].values()) == 1


# -- inference: update, complement, another subject ----------------------------------------
def _infer(embedder, texts: list[str]):
    vecs = embedder.embed(texts)
    items = [
        InferenceItem(f"m{i}", t, float(i), norm_sha256(t), negates(t)) for i, t in enumerate(texts)
    ]
    return infer_subjects(items, vecs)


def test_inference_tells_update_complement_and_duplicate_apart(embedder) -> None:
    found = _infer(embedder, [COFFEE, TEA, "I'm allergic to peanuts.", "I'm also allergic to shellfish.",
                              "My sister lives in Berlin.", "Every morning I drink a large black coffee.",
                              "I drink black coffee each morning."])  # fmt: skip
    assert found.updates == {"m0": "m1"}  # coffee -> tea only; the allergies complement
    assert found.statements["m0"] == found.statements["m5"]  # said again: one statement
    # close in meaning, but merging it would drop "large": two statements (restate.py)
    assert found.statements.get("m6") != found.statements["m0"]
    assert "m2" not in found.statements and "m4" not in found.updates
    assert found.subjects["m0"] == found.subjects["m1"]  # one inferred subject for the topic
    assert found.subjects["m2"] != found.subjects["m0"]


def test_inference_keeps_known_keys(embedder) -> None:
    texts = [COFFEE, TEA]
    vecs = embedder.embed(texts)
    items = [
        InferenceItem(f"m{i}", t, float(i), norm_sha256(t), negates(t)) for i, t in enumerate(texts)
    ]
    found = infer_subjects(items, vecs, known={"m0": "beverages ~abc123"})
    assert found.subjects == {"m0": "beverages ~abc123", "m1": "beverages ~abc123"}
    assert found.new == {"m1": "beverages ~abc123"}


def test_grouping_is_blocked_not_n_by_n() -> None:
    """50k copies of one statement: memory stays at blocks, never a 50k x 50k matrix."""
    import tracemalloc

    n, dim = 50_000, 384
    rng = np.random.default_rng(0)
    base = rng.normal(size=dim).astype(np.float32)
    vecs = base + 0.01 * rng.normal(size=(n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    items = [
        InferenceItem(f"m{i:05d}", "I drink coffee.", float(i), f"s{i}", False) for i in range(n)
    ]
    tracemalloc.start()
    found = infer_subjects(items, vecs)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(set(found.subjects.values())) == 1
    assert len(set(found.statements.values())) == 1  # all one statement, chained by neighbours
    assert peak < 250 * 2**20, peak  # an N x N float32 matrix alone would be 10 GB


# -- remember: verification by source, subject inferred and stored as inferred -------------
def test_remember_verification_depends_on_source(home: Path, embedder) -> None:
    store = SqliteStore(home / "memlife.db")
    try:
        mem = LongTermMemory(store, embedder=embedder, ledger=AccessLedger(home / "ledger"))
        inferred = mem.remember(
            ACTOR, NS, None, "Seems to prefer trains.", source="agent_inferred", at=DAY1
        )
        stated = mem.remember(ACTOR, NS, None, "I am vegetarian.", source="user_stated", at=DAY1)
        confirmed = mem.remember(
            ACTOR, NS, None, "My account is in EUR.", source="user_confirmed", at=DAY1
        )
        assert store.get(inferred.record_id).last_verified_at is None  # never at write
        assert store.get(stated.record_id).last_verified_at is None
        assert store.get(confirmed.record_id).last_verified_at == DAY1
        again = mem.remember(ACTOR, NS, None, "I am vegetarian.", source="user_stated", at=DAY40)
        assert (
            again.record_id == stated.record_id
            and store.get(stated.record_id).last_verified_at == DAY40
        )
        mem.remember(ACTOR, NS, None, "Seems to prefer trains.", source="agent_inferred", at=DAY40)
        assert (
            store.get(inferred.record_id).last_verified_at is None
        )  # inference restated: not proof
        from memlife.inferred import InferredSubjects

        subjects = InferredSubjects.for_store(store).get(
            (ACTOR, NS), [inferred.record_id, stated.record_id]
        )
        assert set(subjects) == {inferred.record_id, stated.record_id}
        assert (
            store.get(stated.record_id).subject is None
        )  # inferred keys never fill the record's own
    finally:
        store.close()


def test_recall_never_returns_an_expired_record(home: Path, embedder) -> None:
    store = SqliteStore(home / "memlife.db")
    try:
        mem = LongTermMemory(store, embedder=embedder, ledger=AccessLedger(home / "ledger"))
        rid = mem.remember(ACTOR, NS, None, "My gate code is 4711.").record_id
        assert mem.recall(ACTOR, "gate code")[0].record.id == rid
        rec = store.get(rid)
        store.put_many(
            [rec.model_copy(update={"expires_at": datetime.now(UTC) - timedelta(seconds=1)})]
        )
        assert [h.record.id for h in mem.recall(ACTOR, "gate code")] == []
    finally:
        store.close()


# -- the review workflow ------------------------------------------------------------------
def _seed(home: Path, records: list[MemoryRecord]) -> None:
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many(records)
    finally:
        store.close()


_STEPS = ["rotate the database credentials every quarter.", "page the on-call engineer for outages.",
          "tag releases with the ticket number.", "back up the billing ledger nightly.",
          "run the smoke tests before a deploy.", "archive closed incidents after a month.",
          "renew TLS certificates a week early.", "review firewall rules every sprint."]  # fmt: skip


def _rec(rid: str, **kw: Any) -> MemoryRecord:
    base = dict(id=rid, actor_id="org-1", namespace="/orgs/org-1/procedures", memory_type="procedural",
                content=f"Runbook {rid}: " + _STEPS[sum(map(ord, rid)) % len(_STEPS)], created_at=DAY1, source=Source.system_of_record)  # fmt: skip
    base.update(kw)
    return MemoryRecord(**base)


def test_review_list_filters_and_every_decision(home: Path) -> None:
    _seed(home, [_rec("p1"), _rec("p2", owner="team-ops"), _rec("p3", namespace="/orgs/org-1/runbooks"),
                 _rec("p4"), _rec("p5"), _rec("p6", namespace="/orgs/org-1/runbooks")])  # fmt: skip
    run_local(RunConfig(dry_run=False, now=NIGHT + timedelta(days=400)))
    cli = CliRunner()
    every = json.loads(cli.invoke(app, ["review", "list", "--json"]).stdout)
    assert {i["record_id"] for i in every} == {"p1", "p2", "p3", "p4", "p5", "p6"}
    owned = json.loads(cli.invoke(app, ["review", "list", "--owner", "team-ops", "--json"]).stdout)
    assert {i["record_id"] for i in owned} == {"p2"}
    by_reason = json.loads(
        cli.invoke(app, ["review", "list", "--reason", "MISSING_OWNER", "--json"]).stdout
    )
    assert {i["record_id"] for i in by_reason} == {"p1", "p3", "p4", "p5", "p6"}
    in_ns = json.loads(
        cli.invoke(app, ["review", "list", "--namespace", "/orgs/*/runbooks", "--json"]).stdout
    )
    assert {i["record_id"] for i in in_ns} == {"p3", "p6"}
    assert "p1" in cli.invoke(app, ["review", "list"]).stdout  # the table

    def item(rid: str, reason: str = "MISSING_OWNER") -> str:
        return next(i["item_id"] for i in every if i["record_id"] == rid and i["reason"] == reason)

    def resolve(iid: str, decision: str, *extra: str) -> dict:
        res = cli.invoke(
            app,
            [
                "review",
                "resolve",
                iid,
                "--decision",
                decision,
                "--reviewer",
                "bo",
                "--json",
                *extra,
            ],
        )
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)

    assert resolve(item("p1"), "keep")["item"]["state"] == "resolved"
    resolve(item("p2", "STALE_VERIFICATION"), "verify")
    assert _records(home)["p2"].last_verified_at is not None
    assert resolve(item("p4"), "delete")["counts"]["deleted"] == 1
    assert "p4" not in _records(home)
    assert resolve(item("p5"), "dispute")["item"]["state"] == "disputed"
    refused = cli.invoke(app, ["review", "resolve", item("p3"), "--decision", "supersede", "--by", "p1",
                               "--reviewer", "bo"])  # fmt: skip
    assert refused.exit_code == 2 and "another actor/namespace" in refused.output
    no_pair = cli.invoke(
        app, ["review", "resolve", item("p3"), "--decision", "supersede", "--reviewer", "bo"]
    )
    assert no_pair.exit_code == 2 and "--by" in no_pair.output
    itself = cli.invoke(app, ["review", "resolve", item("p3"), "--decision", "supersede", "--by",
                              "p3", "--reviewer", "bo"])  # fmt: skip
    assert itself.exit_code == 2 and "by itself" in itself.output  # invariant 3
    assert _records(home)["p3"].status is Status.active
    resolve(item("p3"), "supersede", "--by", "p6")
    assert (
        _records(home)["p3"].status is Status.superseded
        and _records(home)["p3"].provenance.replaced_by == "p6"
    )
    bad = cli.invoke(
        app, ["review", "resolve", item("p1"), "--decision", "keep", "--reviewer", "bo"]
    )
    assert bad.exit_code == 2 and "already resolved" in bad.output
    left = {i["item_id"]: (i["record_id"], i["state"]) for i in
            json.loads(cli.invoke(app, ["review", "list", "--json"]).stdout)}  # fmt: skip
    assert left[item("p5")] == ("p5", "disputed") and item("p1") not in left
    assert "p4" not in {rid for rid, _ in left.values()}  # deleted: its other items closed too
    # receipts name the reviewer
    receipts = [
        json.loads(p.read_text()) for p in (home / "receipts" / "operations").glob("*.json")
    ]
    reviewed = [r for r in receipts if r["reviewer_identity"] == "bo"]
    assert {r["record_id"] for r in reviewed} == {"p1", "p2", "p3", "p4", "p5"}


def test_a_kept_record_is_not_left_for_review_every_night(home: Path) -> None:
    """Adversarial review: once a reviewer kept a record, every later night still reported
    it "left for review" (the run's `reviewed`). It is answered: counted `review_answered`,
    left out of `reviewed`, no item reopened; once its content changes, it is asked again."""
    _seed(home, [_rec("k1"), _rec("k2")])
    when = NIGHT + timedelta(days=400)
    first = run_local(RunConfig(dry_run=False, now=when))
    assert first.lifecycle["reviewed"] == 2
    cli = CliRunner()
    for item in json.loads(cli.invoke(app, ["review", "list", "--json"]).stdout):
        if item["record_id"] == "k1":
            res = cli.invoke(app, ["review", "resolve", item["item_id"], "--decision", "keep",
                                   "--reviewer", "bo"])  # fmt: skip
            assert res.exit_code == 0, res.output
    later = run_local(RunConfig(dry_run=False, now=when + timedelta(days=1)))
    assert later.counts["review"] == 2  # still planned review: nothing changes the record
    assert later.lifecycle["reviewed"] == 1 and later.other["review_answered"] == 1
    assert later.other["review_opened"] == 0
    dry = run_local(RunConfig(dry_run=True, now=when + timedelta(days=2)))
    assert dry.other["review_answered"] == 1 and dry.lifecycle["reviewed"] == 1
    store = SqliteStore(home / "memlife.db")
    try:
        k1 = store.get("k1")
        assert k1 is not None
        store.put_many([k1.model_copy(update={"content": "Runbook k1: page the on-call twice."})])
    finally:
        store.close()
    changed = run_local(RunConfig(dry_run=False, now=when + timedelta(days=3)))
    assert changed.lifecycle["reviewed"] == 2 and changed.other["review_asked_again"] >= 1
    open_now = json.loads(cli.invoke(app, ["review", "list", "--json"]).stdout)
    assert "k1" in {i["record_id"] for i in open_now}


def test_an_erased_records_review_items_are_closed(home: Path) -> None:
    """Adversarial review (left before): a review item whose record was erased stayed open,
    waiting for a reviewer for ever. Erasure closes it (decision `erased`, the erase
    operation named); the other records' items stay open."""
    _seed(home, [_rec("x1"), _rec("x2")])
    run_local(RunConfig(dry_run=False, now=NIGHT + timedelta(days=400)))
    cli = CliRunner()
    before = json.loads(cli.invoke(app, ["review", "list", "--json"]).stdout)
    assert {i["record_id"] for i in before} == {"x1", "x2"}
    res = cli.invoke(app, ["erase", "--actor", "org-1", "--id", "x1", "--yes", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["counts"]["review_items_closed"] == sum(
        1 for i in before if i["record_id"] == "x1"
    )
    after = json.loads(cli.invoke(app, ["review", "list", "--json"]).stdout)
    assert {i["record_id"] for i in after} == {"x2"}
    store = SqliteStore(home / "memlife.db")
    try:
        closed = ReviewQueue.for_store(store).for_record("x1", "org-1", "/orgs/org-1/procedures")
    finally:
        store.close()
    assert closed and all(i.state == "resolved" and i.decision == "erased" for i in closed)
    assert all(i.operation_id for i in closed)


def test_a_disputed_record_is_never_deleted_until_resolved(home: Path) -> None:
    _seed(home, [_rec("e1", namespace="/users/u-1/episodes", actor_id="u-1", memory_type="episodic",
                      owner=None, expires_at=NIGHT + timedelta(days=2), content="Visited Porto.")])  # fmt: skip
    run_local(RunConfig(dry_run=False, now=NIGHT))
    store = SqliteStore(home / "memlife.db")
    try:
        queue = ReviewQueue.for_store(store)
        from memlife.plan import Action, Decision, Reason

        d = Decision(
            "e1", "u-1", "/users/u-1/episodes", Action.review, [Reason.LOW_SCORE], 0.1, priority=1.0
        )
        queue.queue([d], budget=10, run_id="r-test", at=NIGHT)
        iid = queue.list(actor="u-1")[0].item_id
    finally:
        store.close()
    res = CliRunner().invoke(
        app, ["review", "resolve", iid, "--decision", "dispute", "--reviewer", "cy"]
    )
    assert res.exit_code == 0, res.output
    later = run_local(RunConfig(dry_run=False, now=NIGHT + timedelta(days=5)))  # past its expiry
    assert "e1" in _records(home) and later.lifecycle["deleted"] == 0
    res = CliRunner().invoke(
        app, ["review", "resolve", iid, "--decision", "keep", "--reviewer", "cy"]
    )
    assert res.exit_code == 0
    run_local(RunConfig(dry_run=False, now=NIGHT + timedelta(days=6)))
    assert "e1" not in _records(home)  # resolved: the expiry obligation goes ahead


def test_review_budget_opens_by_priority_and_counts_the_rest(home: Path) -> None:
    from memlife.plan import Action, Decision, Reason

    store = SqliteStore(home / "memlife.db")
    try:
        queue = ReviewQueue.for_store(store)
        ds = [Decision(f"r{i}", "a", "/n", Action.review, [Reason.MISSING_OWNER], 0.5, priority=float(i))
              for i in range(10)]  # fmt: skip
        counts = queue.queue(ds, budget=3, run_id="night-1", at=NIGHT)
        assert counts["review_opened"] == 3 and counts["review_waiting"] == 7
        assert [i.record_id for i in queue.list()] == ["r9", "r8", "r7"]  # highest priority first
        counts = queue.queue(ds, budget=3, run_id="night-2", at=NIGHT + timedelta(days=1))
        assert counts["review_carried"] == 3 and counts["review_opened"] == 3
        assert counts["review_waiting"] == 4
        assert {i.record_id: i.nights for i in queue.list()}["r9"] == 2
    finally:
        store.close()


def test_hold_place_is_receipted_and_wins(home: Path) -> None:
    ns = "/users/u-1/procedures"  # deletion is enforced here
    _seed(
        home,
        [
            _rec(
                "h1",
                owner="team",
                expires_at=NIGHT - timedelta(days=1),
                namespace=ns,
                actor_id="u-1",
            ),
            _rec(
                "h2",
                owner="team",
                expires_at=NIGHT - timedelta(days=1),
                namespace=ns,
                actor_id="u-1",
            ),
        ],
    )
    res = CliRunner().invoke(app, ["hold", "place", "--id", "h1", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["held"] == ["h1"]
    op = out["operations"][0]["operation_id"]
    receipt = json.loads((home / "receipts" / "operations" / f"{op}.json").read_text())
    assert receipt["action"] == "hold" and receipt["record_id"] == "h1"
    run_local(RunConfig(dry_run=False, now=NIGHT))
    assert "h1" in _records(home) and "h2" not in _records(home)  # both expired; h1 is held
    again = CliRunner().invoke(app, ["hold", "place", "--id", "h1", "--json"])
    assert again.exit_code == 0 and json.loads(again.stdout)["already_held"] == ["h1"]
    none = CliRunner().invoke(
        app, ["hold", "place", "--actor", "org-1", "--subject", "nothing-here"]
    )
    assert none.exit_code == 1  # nothing it names exists: "not found" (README "Exit codes")


def test_superseded_originals_are_deleted_after_retention(home: Path) -> None:
    _seed(home, [
        _rec("new", owner="t", memory_type="semantic", namespace="/users/u/facts", actor_id="u"),
        _rec("old", owner="t", memory_type="semantic", namespace="/users/u/facts", actor_id="u",
             status=Status.superseded, status_changed_at=NIGHT - timedelta(days=100),
             provenance={"replaced_by": "new"}),
        _rec("sens", owner="t", memory_type="semantic", namespace="/users/u/facts", actor_id="u",
             status=Status.superseded, status_changed_at=NIGHT - timedelta(days=40),
             retention_class="sensitive", provenance={"replaced_by": "new"}),
        _rec("young", owner="t", memory_type="semantic", namespace="/users/u/facts", actor_id="u",
             status=Status.superseded, status_changed_at=NIGHT - timedelta(days=40),
             provenance={"replaced_by": "new"}),
    ])  # fmt: skip
    from memlife.model import plan_view
    from memlife.plan import Action, Planner, Reason
    from memlife.policy import load_policy

    views = [plan_view(r) for r in _records(home).values()]
    ds = {d.id: d for d in Planner(load_policy(), NIGHT).plan_shard([views])}
    for rid in ("old", "sens"):  # 90 days standard, 30 sensitive
        assert (
            ds[rid].action is Action.delete_expired
            and Reason.SUPERSEDED_RETENTION in ds[rid].reasons
        )
    assert ds["young"].action is Action.retain and ds["new"].action is not Action.delete_expired
    # a retention deletion is a judgement: without an evaluation set the gate withholds it
    summary = run_local(RunConfig(dry_run=False, now=NIGHT))
    assert summary.lifecycle["deleted"] == 0 and "old" in _records(home)


def test_offline_an_additive_newer_statement_supersedes_nothing(home: Path) -> None:
    """Adversarial review: in a subject group the newest statement won offline, so "Also
    allergic to shellfish." superseded "Allergic to peanuts.". The extractive consolidator
    keeps such a group apart (as a model answering "complement" would), once: the next
    night does not try it again. A real change of preference still supersedes."""

    def fact(rid: str, text: str, subject: str, day: datetime) -> MemoryRecord:
        return MemoryRecord(
            id=rid, actor_id=ACTOR, namespace=NS, memory_type="semantic", content=text,
            subject=subject, owner="team", source=Source.user_stated, created_at=day,
            last_verified_at=day,
        )  # fmt: skip

    store = SqliteStore(home / "memlife.db")
    store.put_many([
        fact("m-peanuts", "Allergic to peanuts.", "allergies", DAY1),
        fact("m-shellfish", "Also allergic to shellfish.", "allergies", DAY40),
        fact("m-window", "Prefers a window seat on flights.", "seat", DAY1),
        fact("m-aisle", "Prefers an aisle seat on flights.", "seat", DAY40),
    ])  # fmt: skip
    store.close()
    first = run_local(RunConfig(dry_run=False, now=NIGHT))
    recs = _records(home)
    assert recs["m-peanuts"].status is Status.active and recs["m-shellfish"].status is Status.active
    assert recs["m-window"].status is Status.superseded  # a changed preference: the newer wins
    assert first.lifecycle["consolidated"] == 1, first.as_json()
    later = run_local(RunConfig(dry_run=False, now=NIGHT + timedelta(days=1)))
    assert later.lifecycle["consolidated"] == 0 and later.model["rejections"] == {}, later.as_json()
    assert _records(home)["m-peanuts"].status is Status.active
