"""The regression gate: before/after on a shadow view, blocking to quarantine, evaluation sets."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from memlife.backends import embedding_cache
from memlife.cli import app
from memlife.demo import generate
from memlife.evalset import CaseKind, EvalSetError, Impact, dump_cases, load_cases, parse_cases
from memlife.evidence_key import keyed
from memlife.gate import evaluate
from memlife.journal import OpKind, OpState, open_journal
from memlife.model import Status
from memlife.pipeline import RunConfig, run_local
from memlife.policy import load_policy
from memlife.quarantine import list_quarantined, restore
from tests.support.gate import (
    ACTOR,
    ALLERGY_KEPT,
    FACTS,
    NOW,
    rec,
    store_at,
    ttl_policy,
    vector_row,
    write_cases,
)


def test_policy_change_that_would_delete_a_must_retain_fact_is_blocked_and_quarantined(
    home: Path, tmp_path: Path
) -> None:
    store = store_at(home)
    store.put_many(FACTS)
    embedding_cache(store).get_or_embed(FACTS)  # what online recall left in the cache
    before = {r.id: store.get(r.id) for r in FACTS}
    vectors = {r.id: vector_row(store, r) for r in FACTS}
    store.close()
    cases = write_cases(
        tmp_path / "cases.yaml",
        [
            {
                "id": "allergy-kept",
                "kind": "recent_preference",
                "query": "Is the user allergic to any food?",
                "actor_id": ACTOR,
                "must_retrieve": ["m-allergy"],
                "impact": "high",
                "k": 3,
            },
            {
                "id": "router-intact",
                "kind": "procedure",
                "query": "How do I reset the router?",
                "actor_id": ACTOR,
                "must_retrieve": ["m-router"],
                "impact": "high",
                "k": 3,
            },
        ],
    )

    summary = run_local(
        RunConfig(
            dry_run=False,
            now=NOW,
            policy=ttl_policy(tmp_path, 30),
            eval_cases=cases,
            consolidate=False,
        )
    )

    gate = summary.gate
    assert gate is not None and gate["blocked"] is True
    assert "HIGH_IMPACT_CASE_FAILED" in gate["reasons"]
    assert gate["high_impact_failed"] == ["allergy-kept"]  # the procedure is untouched
    g = gate["gates"]["must_retain_recall"]
    assert (g["before"], g["value"], g["threshold"], g["passed"]) == (1.0, 0.5, 1.0, False)
    assert gate["proposed_deletions"] == 3  # allergy + dog (TTL) + the expired trip
    # nothing deleted: every candidate quarantined instead
    assert summary.lifecycle["deleted"] == 0 and summary.lifecycle["quarantined"] == 3
    store = store_at(home)
    assert store.count() == 4
    assert {r.id: r.status for r in store.get_many([r.id for r in FACTS]).values()} == {
        "m-allergy": Status.quarantined,
        "m-dog": Status.quarantined,
        "m-trip": Status.quarantined,
        "m-router": Status.active,
    }
    listed = {q["id"]: q for q in list_quarantined(store)}
    assert set(listed) == {"m-allergy", "m-dog", "m-trip"}
    assert "GATE_BLOCKED" in listed["m-allergy"]["reasons"]
    # quarantined records are invisible to recall
    report = evaluate(store, load_cases(cases), policy=load_policy())
    assert report["failed_cases"] == ["allergy-kept"]
    # the run receipt carries the verdict: ids, gate names and figures, no content
    receipt_bytes = Path(summary.receipt or "").read_bytes()
    receipt = json.loads(receipt_bytes)
    assert receipt["gate"]["high_impact_failed"] == ["allergy-kept"]
    for r in FACTS:
        assert r.content.encode() not in receipt_bytes
    assert b"allergic" not in receipt_bytes and b"Is the user" not in receipt_bytes

    # restore brings them back exactly: content, every field, the embedding cache row
    result = restore(store, ["m-allergy", "m-dog", "m-trip"], now=NOW + timedelta(days=1))
    assert result["status"] == "success" and result["run_id"].startswith("manual-")
    assert result["counts"]["restored"] == 3
    for rid, original in before.items():
        assert store.get(rid) == original, rid
        assert vector_row(store, original) == vectors[rid]
    ops = [o for o in open_journal(store).by_run(result["run_id"])]
    assert {o.kind for o in ops} == {OpKind.restore} and all(
        o.state is OpState.RECEIPTED for o in ops
    )
    receipts = Path(str(home / "receipts"))
    for o in ops:
        doc = json.loads((receipts / "operations" / f"{o.operation_id}.json").read_text())
        assert doc["action"] == "restore" and doc["outcome"] == "restored"
        secret = open_journal(store).run_secret()  # receipts key their hashes (session 29)
        assert doc["content_sha256"] == keyed(before[o.record_id].sha256, secret)  # type: ignore[union-attr]
    assert evaluate(store, load_cases(cases))["failed_cases"] == []
    # restoring again is refused per record, and said so
    again = restore(store, ["m-allergy"], now=NOW + timedelta(days=2))
    assert again["status"] == "partial_failure"
    assert again["operations"][0]["error"] == "NOT_QUARANTINED"
    store.close()


def test_gate_lets_harmless_deletions_through_and_expired_facts_stop_showing(
    home: Path, tmp_path: Path
) -> None:
    store = store_at(home)
    store.put_many(FACTS)
    store.close()
    cases = write_cases(
        tmp_path / "cases.yaml",
        [
            ALLERGY_KEPT,
            {
                "id": "trip-expired",
                "kind": "expired_fact",
                "query": "Did the user plan a trip to Osaka?",
                "actor_id": ACTOR,
                "forbidden": ["m-trip"],
                "k": 3,
            },
        ],
    )
    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases, consolidate=False))
    gate = summary.gate
    assert gate is not None and gate["blocked"] is False and gate["proposed_deletions"] == 1
    assert gate["before"]["failed_cases"] == ["trip-expired"]  # shown while still active
    assert gate["after"]["failed_cases"] == []  # the shadow view without it
    assert gate["gates"]["forbidden_retrieval"] == {
        "value": 0.0,
        "threshold": 0.0,
        "passed": True,
        "before": 1.0,
        "result": "pass",
    }
    assert summary.lifecycle["deleted"] == 1 and summary.lifecycle["quarantined"] == 0
    store = store_at(home)
    assert store.get("m-trip") is None and store.get("m-allergy") is not None
    store.close()


def test_gate_never_deletes_to_evaluate(home: Path, tmp_path: Path) -> None:
    """A dry run with a blocking gate: the verdict is computed, no record changes."""
    store = store_at(home)
    store.put_many(FACTS)
    before = {r.id: store.get(r.id) for r in FACTS}
    store.close()
    cases = write_cases(
        tmp_path / "cases.yaml",
        [
            ALLERGY_KEPT,
        ],
    )
    summary = run_local(
        RunConfig(dry_run=True, now=NOW, policy=ttl_policy(tmp_path, 30), eval_cases=cases)
    )
    assert summary.gate is not None and summary.gate["blocked"] is True
    store = store_at(home)
    assert {r.id: store.get(r.id) for r in FACTS} == before
    store.close()


def test_superseded_fact_still_active_fails_the_forbidden_gate(home: Path, tmp_path: Path) -> None:
    old = rec(
        "m-tea", "preferences", "Drinks only green tea, never coffee.", subject="beverage", age=300
    )
    new = rec(
        "m-coffee",
        "preferences",
        "Switched to black coffee every morning; no longer drinks tea.",
        subject="beverage",
        age=20,
    )
    store = store_at(home)
    store.put_many([old, new, *FACTS])
    cases = parse_cases(
        [
            {
                "id": "drink-now",
                "kind": "recent_preference",
                "query": "What does the user drink in the morning?",
                "actor_id": ACTOR,
                "must_retrieve": ["m-coffee"],
                "forbidden": ["m-tea"],
                "k": 3,
            },
            {
                "id": "tea-claim",
                "kind": "superseded_fact",
                "query": "Does the user drink tea?",
                "actor_id": ACTOR,
                "namespace": f"/users/{ACTOR}/preferences",
                "forbidden": [{"claim": "drinks only green tea"}],
                "k": 3,
            },
        ]
    )
    report = evaluate(store, cases)
    gates = report["gates"]
    assert (
        gates["forbidden_retrieval"]["passed"] is False
        and gates["forbidden_retrieval"]["value"] == 1.0
    )
    assert gates["contradiction_rate"]["passed"] is False  # old and new handed over together
    assert gates["must_retain_recall"]["passed"] is True
    assert report["failed_cases"] == ["drink-now", "tea-claim"]
    by_id = {r["id"]: r for r in report["results"]}
    assert by_id["drink-now"]["forbidden_hits"] == ["m-tea"]
    assert by_id["tea-claim"]["forbidden_hits"] == ["text"]  # claims are never echoed
    store.close()

    # Supersede applied (apply run, extractive consolidation, gated by the same set): the
    # stale claim is gone and the current one is kept through its replacement.
    path = str(dump_cases(cases, tmp_path / "cases.yaml"))
    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=path))
    assert summary.gate is not None and summary.gate["blocked"] is False
    assert summary.gate["proposed_supersedes"] == 2 and summary.gate["staged_replacements"] == 1
    assert summary.lifecycle["superseded"] == 2 and summary.lifecycle["consolidated"] == 1
    store = store_at(home)
    report = evaluate(store, cases)
    assert report["failed_cases"] == [] and all(g["passed"] for g in report["gates"].values())
    retrieved = {r["id"]: r["retrieved"] for r in report["results"]}["drink-now"]
    assert "m-coffee" not in retrieved  # superseded itself: satisfied by its replacement
    repl = store.get(retrieved[0])
    assert repl is not None and "m-coffee" in repl.provenance.supersedes
    store.close()


def test_replicas_and_answer_checks(home: Path) -> None:
    store = store_at(home)
    store.put_many(FACTS)
    cases = parse_cases(
        [
            {
                "id": "pet",
                "query": "What is the dog called?",
                "actor_id": ACTOR,
                "must_retrieve": [{"fact": "dog named rex"}],
                "answer_must_include": ["Rex"],
                "answer_must_not_include": ["Luna"],
                "k": 2,
            },
        ]
    )
    policy = load_policy().model_copy(
        update={"gate": load_policy().gate.model_copy(update={"replicas": 3})}
    )
    answers = iter(["The dog is Rex.", "Rex.", "It is Luna."])  # the model varies by replica
    report = evaluate(store, cases, policy=policy, answerer=lambda q, ctx: next(answers))
    assert report["replicas"] == 3
    assert report["flaky_cases"] == ["pet"] and report["failed_cases"] == ["pet"]  # worst replica
    assert report["results"][0]["answer"] == {"checked": True, "passed": False}
    assert evaluate(store, cases)["failed_cases"] == []  # no model: answer checks skipped
    store.close()


def test_case_formats_yaml_and_jsonl_agree_and_errors_name_the_case(tmp_path: Path) -> None:
    cases = [
        {
            "id": "a",
            "kind": "procedure",
            "query": "reset router",
            "actor_id": "u-1",
            "must_retrieve": ["m-1", {"fact": "unplug it"}],
            "impact": "high",
            "min_result": 0.5,
            "k": 4,
        },
        {
            "id": "b",
            "kind": "erased",
            "query": "peanuts",
            "actor_id": "u-1",
            "namespace": "/users/u-1/facts",
            "forbidden": [{"id": "m-2"}, {"claim": "peanuts"}],
        },
    ]
    y = tmp_path / "cases.yaml"
    y.write_text(yaml.safe_dump(cases))
    j = tmp_path / "cases.jsonl"
    j.write_text("".join(json.dumps(c) + "\n" for c in cases))
    assert load_cases(y) == load_cases(j)
    a, b = load_cases(y)
    assert (
        a.impact is Impact.high
        and a.kind is CaseKind.procedure
        and a.must_retrieve[1].text == "unplug it"
    )
    assert b.forbidden[0].id == "m-2" and b.impact is Impact.normal and b.k == 5
    with pytest.raises(EvalSetError, match="case b: .*must_retrieve or forbidden"):
        parse_cases([{"id": "b", "query": "q", "actor_id": "u"}])
    with pytest.raises(EvalSetError, match="appears twice"):
        parse_cases([cases[0], cases[0]])
    with pytest.raises(EvalSetError, match="case a: impact"):
        parse_cases([{**cases[0], "impact": "urgent"}])


def test_eval_init_and_eval_cli_on_demo_data(home: Path, tmp_path: Path) -> None:
    store = store_at(home)
    store.put_many(list(generate(2000, anchor=NOW)))
    store.close()
    runner = CliRunner()
    out = tmp_path / "starter.yaml"
    res = runner.invoke(
        app, ["eval", "init", "-o", str(out), "--actors", "3", "--now", NOW.isoformat(), "--json"]
    )
    assert res.exit_code == 0, res.output
    kinds = json.loads(res.stdout)["kinds"]
    assert set(kinds) == {"recent_preference", "superseded_fact", "expired_fact", "procedure"}
    cases = load_cases(out)
    assert all(c.impact is Impact.high for c in cases if c.kind is CaseKind.procedure)
    # case ids reach receipts: made of actor and record ids, never a subject's words
    # (adversarial review: an erased subject stayed in the gate's failed_cases)
    subjects = {r.subject.replace(" ", "_") for r in generate(2000, anchor=NOW) if r.subject}
    assert not [c.id for c in cases if any(s in c.id for s in subjects)]
    assert all(
        c.forbidden and not c.must_retrieve for c in cases if c.kind is CaseKind.superseded_fact
    )
    # on the raw store, stale and expired statements still surface: the gate table says so
    res = runner.invoke(app, ["eval", "--cases", str(out), "--json"])
    assert res.exit_code == 1
    report = json.loads(res.stdout)
    assert report["gates"]["forbidden_retrieval"]["passed"] is False
    assert report["gates"]["must_retain_recall"]["passed"] is True
    res = runner.invoke(app, ["eval", "--cases", str(out)])
    assert "forbidden_retrieval" in res.stdout and "FAIL" in res.stdout
    # the nightly apply run with the set: supersedes first, then the gate passes on
    # the shadow view and the expired records are deleted
    summary = run_local(
        RunConfig(
            dry_run=False, now=NOW, eval_cases=str(out), actors=("u-000000", "u-000001", "u-000002")
        )
    )
    assert summary.gate is not None and summary.gate["blocked"] is False
    assert summary.gate["gates"]["forbidden_retrieval"]["passed"] is True
    assert summary.lifecycle["deleted"] > 0 and summary.lifecycle["quarantined"] == 0
    after = json.loads(runner.invoke(app, ["eval", "--cases", str(out), "--json"]).stdout)
    assert after["failed_cases"] == [] and after["gates"]["forbidden_retrieval"]["passed"] is True
    # competing statements left for a reviewer (a weaker newer source) still count
    assert (
        after["gates"]["contradiction_rate"]["value"]
        < report["gates"]["contradiction_rate"]["value"]
    )
    assert runner.invoke(app, ["eval"]).exit_code == 2
    conn = sqlite3.connect(home / "memlife.db")
    assert (
        conn.execute("SELECT count(*) FROM records WHERE status='quarantined'").fetchone()[0] == 0
    )


def test_the_model_answerer_calls_the_messages_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """Checked answers (ANTHROPIC_API_KEY set) go through the SDK for real: the call once
    passed an argument this SDK does not take, hidden by a type: ignore."""
    from memlife.gate import model_answerer_from_env
    from tests.fakes.messages_api import MessagesServer, text_reply

    with MessagesServer() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        answer = model_answerer_from_env()
        assert answer is not None
        server.enqueue(text_reply("Green tea."))
        assert answer("What does she drink?", ["Drinks green tea."]) == "Green tea."
        (req,) = server.requests
        assert "Drinks green tea." in req.body["messages"][0]["content"]


def test_the_after_view_does_not_count_lineage_through_a_record_the_run_deletes(
    home: Path,
) -> None:
    """A case pinned on an original is satisfied through a chain of replacements (R2
    supersedes R1, which superseded the original). A run that deletes R1 breaks the chain
    on the committed store, so its after view must not pass through R1 either: the gate
    sees the regression before the deletion, not on the next night's before view."""
    from memlife.gate import evaluate_changes
    from memlife.model import Provenance

    tea = "The user drinks green tea every morning."
    original = rec("m-orig", "prefs", tea, subject="tea").model_copy(update={
        "status": Status.superseded,
        "provenance": Provenance(replaced_by="m-r1"),
    })  # fmt: skip
    r1 = rec("m-r1", "prefs", tea, subject="tea").model_copy(update={
        "status": Status.superseded,
        "provenance": Provenance(replaced_by="m-r2", supersedes=["m-orig"]),
    })  # fmt: skip
    r2 = rec("m-r2", "prefs", tea + " Oolong on weekends.", subject="tea").model_copy(
        update={"provenance": Provenance(supersedes=["m-r1"])}
    )
    store = store_at(home)
    store.put_many([original, r1, r2])
    cases = parse_cases([{"id": "tea", "query": "What tea does the user drink?",
                          "actor_id": ACTOR, "must_retrieve": ["m-orig"], "impact": "high"}])  # fmt: skip
    gate = load_policy().gate
    assert evaluate(store, cases)["failed_cases"] == []  # the chain holds as stored
    verdict = evaluate_changes(store, cases, gate, deletions=["m-r1"])
    assert verdict["blocked"] is True and verdict["deletions_blocked"] is True, verdict
    # what the after view predicted is what the committed store gives
    store.delete_many(["m-r1"])
    assert evaluate(store, cases)["failed_cases"] == ["tea"]
    store.close()


def test_the_after_view_ranks_a_staged_replacement_without_keeping_its_vector(
    home: Path,
) -> None:
    """A replacement the gate evaluates is no record's content yet (a dry run, or a group
    the gate blocks, never writes it), so no erasure could find its text by a record. The
    gate embeds it for its "after" view and keeps neither its vector nor its token codes;
    the stored records' vectors stay cached as before."""
    from memlife.gate import ShadowRecall
    from memlife.model import content_sha256
    from memlife.stores.sqlite import SqliteStore

    tea = rec("m-tea", "preferences", "Drinks only green tea, never coffee.")
    summary = "The user drinks green tea and has stopped drinking coffee altogether."
    replacement = rec("m-new", "preferences", summary)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([tea])
        cache = embedding_cache(store)
        after = ShadowRecall(store, cache, added=[replacement]).corpus(
            ACTOR, tea.namespace, plus=True
        )
        assert [r.id for r in after.records] == ["m-tea", "m-new"]
        want = cache.embedder.embed([summary])[0]
        assert float(after.vectors[1] @ want) > 0.999  # ranked on its real vector
        rows = store.connection.execute(
            "SELECT content_sha256 FROM embeddings WHERE content_sha256 IN (?, ?)",
            (content_sha256(summary), content_sha256(tea.content)),
        ).fetchall()
    assert {r[0] for r in rows} == {content_sha256(tea.content)}
