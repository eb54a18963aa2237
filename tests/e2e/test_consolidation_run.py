"""Consolidation inside apply runs, with the real Anthropic SDK against a local Messages API.

The scripted model answers like a careful one would (the planner's survivor, verbatim, with
every source id), or, for the injection test, like a gullible one. What is proven is our
side: one call per group, grounding before any write, counts and tokens in the receipt,
nothing to do on the second night.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.consolidate.prompts import TOOL_NAME
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer, tool_use_reply
from tests.support.lifecycle import CUTOFF, check_invariants, gate_cases, seed, snapshot

RECORD = re.compile(r'<(memory_\w+) id="([^"]+)"[^>]*>\n(.*?)\n</\1>', re.S)
SURVIVOR = re.compile(r"considers record \"([^\"]+)\" the newest")  # ids are JSON strings


def careful_model(body: dict[str, Any], lie_every: int = 0, calls: list | None = None):
    text = body["messages"][0]["content"]
    text = text if isinstance(text, str) else "".join(b.get("text", "") for b in text)
    records = {rid: content for _, rid, content in RECORD.findall(text)}
    m = SURVIVOR.search(text)
    survivor = m.group(1) if m and m.group(1) in records else list(records)[-1]
    summary = records[survivor]
    if calls is not None:
        calls.append(sorted(records))
        if lie_every and len(calls) % lie_every == 0:
            summary = "The user owns a yacht named Poseidon and 40 racehorses."
    out = {
        "summary": summary,
        "claims": [summary],
        "dropped_claims": sorted({c for c in records.values() if c != records[survivor]}),
        "confidence": 0.9,
        "source_ids": sorted(records),
    }
    return tool_use_reply(TOOL_NAME, out)


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer) -> dict:
    home = tmp_path / "home"
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    monkeypatch.setenv("MEMLIFE_MODEL_CONCURRENCY", "2")
    db = home / "memlife.db"
    seed(db, records=250, markers=False)
    monkeypatch.setenv("MEMLIFE_EVAL_CASES", gate_cases(db))  # the gate is required
    return {"db": db, "server": messages_server, "home": home}


def _replacements(db: Path) -> dict[str, Any]:
    store = SqliteStore(db)
    try:
        return {r.id: r for r in store.iter_all() if r.id.startswith("r-")}
    finally:
        store.close()


def test_model_consolidation_merges_supersedes_and_counts(env: dict) -> None:
    calls: list = []
    env["server"].set_handler(lambda body: careful_model(body, calls=calls))
    before = snapshot(env["db"])
    first = run_local(RunConfig(dry_run=False, now=CUTOFF))
    assert first.status == "success"
    receipt = json.loads(Path(first.receipt).read_text())
    assert receipt["model"]["calls"] == len(calls) == len(env["server"].message_requests) > 0
    assert receipt["model"]["input_tokens"] > 0 and receipt["model"]["output_tokens"] > 0
    assert receipt["counts"]["consolidated"] == len(calls)  # one call per group, each written
    assert receipt["counts"]["superseded"] > receipt["counts"]["consolidated"]
    assert receipt["other_counts"]["merged_duplicates"] > 0
    assert receipt["other_counts"]["contradictions_resolved"] > 0
    assert receipt["other_counts"]["embedded"] > 0
    # every call saw one actor + namespace only, and no id twice
    after = snapshot(env["db"])
    for ids in calls:
        scopes = {(before[i]["actor_id"], before[i]["namespace"]) for i in ids}
        assert len(scopes) == 1
    check_invariants(before, after, env["home"] / "receipts")
    for repl in _replacements(env["db"]).values():
        sources = {before[i]["content"] for i in repl.provenance.supersedes}
        assert repl.content in sources  # no claim without support
        assert repl.provenance.content_sha256 and repl.provenance.policy_version
    # the second night: nothing to consolidate, nothing to embed, no model call
    n_requests = len(env["server"].message_requests)
    second = run_local(RunConfig(dry_run=False, now=CUTOFF + timedelta(days=1)))
    receipt2 = json.loads(Path(second.receipt).read_text())
    assert receipt2["model"]["calls"] == 0 and len(env["server"].message_requests) == n_requests
    assert receipt2["other_counts"].get("embedded", 0) == 0
    assert receipt2["counts"]["consolidated"] == 0
    assert set(_replacements(env["db"])) == {k for k in after if k.startswith("r-")}


def test_ungrounded_answers_are_rejected_and_originals_kept(env: dict) -> None:
    calls: list = []
    env["server"].set_handler(lambda body: careful_model(body, lie_every=3, calls=calls))
    before = snapshot(env["db"])
    summary = run_local(RunConfig(dry_run=False, now=CUTOFF))
    receipt = json.loads(Path(summary.receipt).read_text())
    lies = len(calls) // 3
    assert lies > 0
    assert receipt["model"]["rejections"] == {"UNGROUNDED_CLAIM": lies}
    assert receipt["counts"]["consolidated"] == len(calls) - lies
    after = snapshot(env["db"])
    assert not any("Poseidon" in r["content"] for r in after.values())
    # the members of every rejected group are untouched
    for n, ids in enumerate(calls, start=1):
        if n % 3 == 0:
            for i in ids:
                assert after[i] == before[i]


def test_model_outage_leaves_originals_and_the_next_run_retries(env: dict) -> None:
    from tests.fakes.messages_api import overloaded_error

    env["server"].set_handler(lambda body: overloaded_error())
    before = snapshot(env["db"])
    first = run_local(RunConfig(dry_run=False, now=CUTOFF))
    receipt = json.loads(Path(first.receipt).read_text())
    assert receipt["model"]["rejections"].get("MODEL_UNAVAILABLE", 0) > 0
    assert receipt["counts"]["consolidated"] == 0 and receipt["counts"]["superseded"] == 0
    after = snapshot(env["db"])
    assert not [
        r for r in after.values() if r["status"] == "superseded" or r["id"].startswith("r-")
    ]
    assert {i: r for i, r in after.items() if r["memory_type"] != "episodic"} == {
        i: r for i, r in before.items() if i in after and r["memory_type"] != "episodic"
    }  # every statement is intact (only expired records were deleted)
    env["server"].set_handler(lambda body: careful_model(body))
    second = run_local(RunConfig(dry_run=False, now=CUTOFF + timedelta(days=1)))
    assert second.lifecycle["consolidated"] > 0


def test_a_group_over_the_cap_is_done_in_one_night(env: dict, tmp_path: Path) -> None:
    """15 statements on one subject: the model sees at most 12, all 15 are superseded by one
    replacement, and the next night has nothing left to do."""
    from memlife.model import MemoryRecord

    store = SqliteStore(env["db"])
    ns = "/users/zz/preferences"
    olds = [
        MemoryRecord(
            id=f"z-{i:02d}",
            actor_id="zz",
            namespace=ns,
            memory_type="semantic",
            subject="beverage",
            owner="t",
            content="Drinks only green tea, never coffee.",
            created_at=CUTOFF - timedelta(days=400 - i),
        )
        for i in range(14)
    ]
    new = MemoryRecord(
        id="z-new",
        actor_id="zz",
        namespace=ns,
        memory_type="semantic",
        subject="beverage",
        owner="t",
        source="user_confirmed",
        content="Switched to black coffee every morning; no longer drinks tea.",
        created_at=CUTOFF - timedelta(days=3),
    )
    store.put_many([*olds, new])
    store.close()
    calls: list = []
    env["server"].set_handler(lambda body: careful_model(body, calls=calls))
    run_local(RunConfig(dry_run=False, now=CUTOFF, actors=("zz",)))
    assert len(calls) == 1 and len(calls[0]) <= 12 and "z-new" in calls[0]
    after = snapshot(env["db"])
    zz = {i: r for i, r in after.items() if r["actor_id"] == "zz"}
    active = [r for r in zz.values() if r["status"] == "active"]
    assert len(active) == 1 and active[0]["content"] == new.content
    assert sorted(active[0]["provenance"]["supersedes"]) == sorted([*(o.id for o in olds), "z-new"])
    again = run_local(RunConfig(dry_run=False, now=CUTOFF + timedelta(days=1), actors=("zz",)))
    assert len(calls) == 1 and again.lifecycle["consolidated"] == again.lifecycle["superseded"] == 0
