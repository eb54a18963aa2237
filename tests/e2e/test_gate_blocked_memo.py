"""A group the regression gate blocks is remembered: it is not re-consolidated every night.

Real SDK against the local Messages API server, real MiniLM, SQLite store. One actor, two
groups: "beverage" (the model calls the coffee statement an update of the tea one; a
high-impact case needs the tea fact, so the gate blocks it) and "pet" (a duplicate: harmless).
The gate names the beverage group as what blocks; the next night sends only the pet group
to the model, and it goes ahead. A changed evaluation set or a changed member re-opens the
blocked group; a dry run reads the memo and never writes it.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.consolidate.prompts import TOOL_NAME
from memlife.errors import PolicyError
from memlife.model import Status
from memlife.pipeline import RunConfig, run_local
from memlife.policy import DEFAULT_POLICY, load_policy, resolve_policy_path
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer, tool_use_reply
from tests.support.gate import ACTOR, NOW, rec

RECORD = re.compile(r'<(memory_\w+) id="([^"]+)"[^>]*>\n(.*?)\n</\1>', re.S)
TEA = rec("m-tea", "prefs", "Drinks only green tea, never coffee.", subject="beverage", age=300)
COFFEE = rec("m-coffee", "prefs", "Switched to black coffee every morning.", subject="beverage", age=20)  # fmt: skip
DOG_1 = rec("m-dog-1", "facts", "Has a dog named Rex.", subject="pet", age=60)
DOG_2 = rec("m-dog-2", "facts", "Has a dog named Rex.", subject="pet", age=30)
TEA_CASE = {"id": "tea-kept", "query": "Which kind of tea does the user drink?", "actor_id": ACTOR,
            "must_retrieve": [{"fact": "green tea"}], "impact": "high", "k": 3}  # fmt: skip
DOG_CASE = {"id": "dog", "query": "What is the dog called?", "actor_id": ACTOR,
            "must_retrieve": [{"fact": "Rex"}], "k": 3}  # fmt: skip


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """The beverage pair is an update (coffee replaces tea); anything else a duplicate."""
    text = body["messages"][0]["content"]
    text = text if isinstance(text, str) else "".join(b.get("text", "") for b in text)
    recs = {rid: content for _, rid, content in RECORD.findall(text)}
    if "m-tea" in recs:
        return tool_use_reply(TOOL_NAME, {
            "summary": recs["m-coffee"], "claims": [recs["m-coffee"]], "confidence": 0.9,
            "source_ids": sorted(recs), "relation": "update", "outdated_ids": ["m-tea"],
        })  # fmt: skip
    newest = sorted(recs)[-1]
    return tool_use_reply(TOOL_NAME, {
        "summary": recs[newest], "claims": [recs[newest]], "confidence": 0.9,
        "source_ids": sorted(recs), "relation": "duplicate",
    })  # fmt: skip


@pytest.fixture()
def env(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer
) -> dict[str, Any]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    home.mkdir()
    store = SqliteStore(home / "memlife.db")
    store.put_many([TEA, COFFEE, DOG_1, DOG_2])
    store.close()
    messages_server.set_handler(answer)
    return {"home": home, "server": messages_server, "cases": cases(tmp_path, [TEA_CASE, DOG_CASE])}


def cases(tmp_path: Path, items: list[dict[str, Any]], name: str = "cases.jsonl") -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(c) + "\n" for c in items))
    return str(path)


def night(env: dict[str, Any], day: int, *, dry: bool = False, eval_cases: str | None = None,
          policy: str | None = None) -> tuple[dict[str, Any], int]:  # fmt: skip
    sent = len(env["server"].message_requests)
    summary = run_local(RunConfig(
        dry_run=dry, with_model=dry, now=NOW + timedelta(days=day),
        eval_cases=eval_cases or env["cases"], policy=policy or DEFAULT_POLICY,
    ))  # fmt: skip
    receipt = json.loads(Path(summary.receipt).read_text()) if summary.receipt else {}
    out = {"gate": summary.gate or {}, "other": summary.other, "receipt": receipt}
    return out, len(env["server"].message_requests) - sent


def status(home: Path) -> dict[str, Status]:
    store = SqliteStore(home / "memlife.db")
    try:
        return {r.id: r.status for r in store.iter_all() if r.id.startswith("m-")}
    finally:
        store.close()


def memo_outcomes(home: Path) -> list[str]:
    con = sqlite3.connect(home / "memlife.db")
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "consolidation_outcomes" not in tables:
            return []
        return sorted(r[0] for r in con.execute("SELECT outcome FROM consolidation_outcomes"))
    finally:
        con.close()


def test_a_blocked_group_costs_no_model_call_the_next_night(env: dict[str, Any]) -> None:
    first, calls = night(env, 0)
    assert calls == 2 and first["gate"]["blocked"] is True
    assert first["gate"]["supersedes_blocked"] is True
    assert len(first["gate"]["blocking_groups"]) == 1  # the beverage group, not the pet group
    assert first["other"]["gate_blocked_groups"] == 2  # the whole staged set is held tonight
    assert first["other"]["gate_blocked_groups_remembered"] == 1
    assert memo_outcomes(env["home"]) == ["GATE_BLOCKED"]
    assert set(status(env["home"]).values()) == {Status.active}

    second, calls = night(env, 1)
    assert calls == 1  # only the pet group: the blocked one is not sent again
    assert second["other"]["consolidation_gate_blocked_unchanged"] == 1
    assert second["gate"]["blocked"] is False
    st = status(env["home"])
    assert st["m-dog-1"] is st["m-dog-2"] is Status.superseded  # the innocent group went ahead
    assert st["m-tea"] is st["m-coffee"] is Status.active  # the fact the case needs stays

    third, calls = night(env, 2)
    assert calls == 0 and third["other"]["consolidation_gate_blocked_unchanged"] == 1


def test_a_changed_evaluation_set_reopens_the_blocked_group(
    env: dict[str, Any], tmp_path: Path
) -> None:
    night(env, 0)
    _, calls = night(env, 1)
    assert calls == 1  # the pet group; beverage is remembered as blocked
    extra = {**DOG_CASE, "id": "dog-again", "query": "Does the user have a pet?"}
    changed = cases(tmp_path, [TEA_CASE, DOG_CASE, extra], "cases-2.jsonl")
    again, calls = night(env, 2, eval_cases=changed)
    assert calls == 1  # the beverage group, judged again under the new set
    assert (
        again["gate"]["blocked"] is True and again["other"]["gate_blocked_groups_remembered"] == 1
    )
    # reformatting the same set is no change
    same = cases(tmp_path, [TEA_CASE, DOG_CASE, extra][::-1][::-1], "cases-3.jsonl")
    Path(same).write_text(Path(same).read_text().replace(", ", ",  "))
    _, calls = night(env, 3, eval_cases=same)
    assert calls == 0


def test_a_changed_member_reopens_the_blocked_group(env: dict[str, Any]) -> None:
    night(env, 0)
    store = SqliteStore(env["home"] / "memlife.db")
    edited = store.get("m-coffee")
    assert edited is not None
    store.put_many([edited.model_copy(update={"content": "Switched to black coffee at work."})])
    store.close()
    again, calls = night(env, 1)
    assert calls == 2  # the edited beverage group (blocked again) and the pet group
    assert again["gate"]["blocked"] is True and len(again["gate"]["blocking_groups"]) == 1


def test_a_gate_threshold_edited_under_the_same_version_reopens_the_blocked_group(
    env: dict[str, Any], tmp_path: Path
) -> None:
    # An operator loosens a threshold and forgets to bump `version`: since session 29 the
    # run is refused before it starts (one policy per version, memlife/policy_record.py);
    # with a new version the blocked group is judged under the policy in force, not
    # skipped for 30 days under the old verdict.
    night(env, 0)
    _, calls = night(env, 1)
    assert calls == 1  # the pet group; beverage is remembered as blocked
    text = resolve_policy_path(None).read_text()
    edited = tmp_path / "edited.yaml"
    edited.write_text(text.replace("aggregate_score_min: 0.9", "aggregate_score_min: 0.5"))
    assert load_policy(edited).version == load_policy(None).version
    sent = len(env["server"].message_requests)
    with pytest.raises(PolicyError, match="names other rules"):
        night(env, 2, policy=str(edited))
    assert len(env["server"].message_requests) == sent  # nothing started
    version = load_policy(None).version
    edited.write_text(edited.read_text().replace(version, version + "-loose", 1))
    _, calls = night(env, 2, policy=str(edited))
    assert calls == 1  # the beverage group, judged again
    # the same policy with other comments and layout is the same policy
    relaid = tmp_path / "relaid.yaml"
    relaid.write_text("# copied\n" + edited.read_text().replace("  replicas: 1", "  replicas:   1"))
    _, calls = night(env, 3, policy=str(relaid))
    assert calls == 0


def test_a_dry_run_reads_the_memo_and_never_writes_it(env: dict[str, Any]) -> None:
    dry, calls = night(env, 0, dry=True)
    assert calls == 2 and dry["gate"]["blocked"] is True
    assert len(dry["gate"]["blocking_groups"]) == 1  # reported, not remembered
    assert "gate_blocked_groups_remembered" not in dry["other"]
    assert memo_outcomes(env["home"]) == []
    applied, calls = night(env, 1)  # so the apply run judges the group itself
    # on the dry run's answers (consolidate/answers.py)
    assert calls == 0 and applied["other"]["model_answers_reused"] == 2
    assert memo_outcomes(env["home"]) == ["GATE_BLOCKED"]
    dry, calls = night(env, 2, dry=True)  # and a later dry run sees the memo
    # (the pet group, held back with the blocked set, is asked the same: its kept answer)
    assert calls == 0 and dry["other"]["consolidation_gate_blocked_unchanged"] == 1
    assert memo_outcomes(env["home"]) == ["GATE_BLOCKED"]


def test_an_evaluation_set_swapped_during_the_run_memoises_nothing(
    env: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run keys the memo by the set it read at start (harmless: the dog case only); the
    # gate then reads the file again, now a set that blocks the beverage group. Remembered
    # under the first set's digest, the group would skip that set's nights for 30 days
    # although that set never judged it.
    import memlife.run_commit as run_commit

    harmless = cases(tmp_path, [DOG_CASE], "harmless.jsonl")
    real_load = run_commit.load_cases

    def swapped(location: str) -> Any:
        Path(location).write_text(json.dumps(TEA_CASE) + "\n" + json.dumps(DOG_CASE) + "\n")
        return real_load(location)

    monkeypatch.setattr(run_commit, "load_cases", swapped)
    first, _ = night(env, 0, eval_cases=harmless)
    assert first["gate"]["blocked"] is True and len(first["gate"]["blocking_groups"]) == 1
    assert "gate_blocked_groups_remembered" not in first["other"]
    assert first["other"]["gate_blocked_not_remembered"] == 1
    assert memo_outcomes(env["home"]) == []
    monkeypatch.setattr(run_commit, "load_cases", real_load)
    Path(harmless).write_text(json.dumps(DOG_CASE) + "\n")
    second, calls = night(env, 1, eval_cases=harmless)
    assert calls == 2  # the beverage group is judged by the set in force, not skipped
    assert "consolidation_gate_blocked_unchanged" not in second["other"]
