"""Session 47 (audit 47d): the before/after regression gate against an adversary and a careless operator.

Real components: the SQLite store, the memlife CLI in-process, the local engine, the real
Anthropic SDK against the local Messages API server, real MiniLM.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.consolidate.prompts import TOOL_NAME
from memlife.model import Status
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer, tool_use_reply
from tests.support.cli import invoke
from tests.support.gate import ACTOR, NOW, rec

RECORD = re.compile(r'<(memory_\w+) id="([^"]+)"[^>]*>\n(.*?)\n</\1>', re.S)
# u-1: a high-impact case pins an allergy; the user then has it erased
ALLERGY = rec("m-allergy", "facts", "Allergic to peanuts.", subject="allergy", age=50)
U1_DOG = rec("m-dog", "facts", "Has a dog named Rex.", subject="pet", age=30)
ALLERGY_CASE = {"id": "allergy", "query": "Is the user allergic to anything?",
                "actor_id": ACTOR, "must_retrieve": ["m-allergy"], "impact": "high"}  # fmt: skip
# u-2: the same cat saved twice, a duplicate no case of u-1 can see (recall is actor-scoped)
U2 = [rec(f"m-u2-cat-{i}", "facts", "Has a cat named Tom.", subject="pet", actor="u-2", age=age)
      for i, age in ((1, 60), (2, 30))]  # fmt: skip


def duplicate(body: dict[str, Any]) -> dict[str, Any]:
    """The model merges any group as a duplicate, keeping the newest text."""
    text = body["messages"][0]["content"]
    text = text if isinstance(text, str) else "".join(b.get("text", "") for b in text)
    recs = {rid: content for _, rid, content in RECORD.findall(text)}
    newest = sorted(recs)[-1]
    return tool_use_reply(TOOL_NAME, {
        "summary": recs[newest], "claims": [recs[newest]], "confidence": 0.9,
        "source_ids": sorted(recs), "relation": "duplicate",
    })  # fmt: skip


@pytest.fixture()
def model(monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer) -> MessagesServer:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    messages_server.set_handler(duplicate)
    return messages_server


def night(cases: str, day: int) -> dict[str, Any]:
    code, out, err = invoke("run", "--engine", "local", "--json", "--eval-cases", cases,
                            "--now", (NOW + timedelta(days=day)).isoformat())  # fmt: skip
    assert code in (0, 5), (code, out, err)
    return json.loads(out)


def test_one_tenants_erased_high_impact_target_does_not_stop_every_tenants_consolidation(
    home: Path, tmp_path: Path, model: MessagesServer
) -> None:
    """u-1's high-impact case pins a record u-1 then has erased (a tombstone: the case is
    evaluated, and fails before and after whatever the run does). u-2's duplicate is the
    night's only change, and no case of u-1 can see it. One tenant's erasure must not hold
    back every other tenant's consolidation, sent to the model and blocked every night (the
    deletions were narrowed so in session 43; a group blocked with none named is not
    remembered, so it is paid for again each night)."""
    home.mkdir()
    store = SqliteStore(home / "memlife.db")
    store.put_many([ALLERGY, U1_DOG, *U2])
    store.close()
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(ALLERGY_CASE) + "\n")
    code, out, err = invoke("erase", "--actor", ACTOR, "--id", "m-allergy", "--yes")
    assert code == 0, (out, err)

    first = night(str(cases), 0)
    sent = len(model.message_requests)
    second = night(str(cases), 1)

    assert first["gate"]["before"]["high_impact_failed"] == ["allergy"]  # not this run's doing
    store = SqliteStore(home / "memlife.db")
    try:
        cat = store.get("m-u2-cat-1")
        assert cat is not None and cat.status is Status.superseded, first["gate"]["reasons"]
    finally:
        store.close()
    assert len(model.message_requests) == sent, second["gate"]["reasons"]  # not asked again


TEA = rec("m-tea", "preferences", "Drinks only green tea, never coffee.", subject="beverage",
          age=300)  # fmt: skip
COFFEE = rec("m-coffee", "preferences",
             "Switched to black coffee every morning; no longer drinks tea.",
             subject="beverage", age=20)  # fmt: skip
# another deployment's starter set (`eval init` there): a preference case and an erasure case
ELSEWHERE = [
    {"id": "pref-nobody-latest-m-9", "kind": "recent_preference", "actor_id": "nobody",
     "query": "What is the user's current preference for beverage?", "must_retrieve": ["m-9"]},
    {"id": "erased-nobody-m-7", "kind": "erased", "actor_id": "nobody",
     "query": "What was erased?", "forbidden": ["m-7"], "k": 100, "threshold": -1.0},
]  # fmt: skip


def test_another_deployments_set_with_an_erasure_case_still_gates_nothing(
    home: Path, tmp_path: Path
) -> None:
    """The operator points the run at another deployment's starter set: none of its actors
    is in this store. Its preference case is NO_RECORDS, but its erasure case (an emptied
    view is allowed to an erasure) counts as covering: the set then satisfies the required
    gate, and u-1's supersede in an enforced namespace goes ahead judged by nothing. What it
    would gate must wait (GATE_UNCOVERED), as for a set of must-retrieve cases alone."""
    home.mkdir()
    store = SqliteStore(home / "memlife.db")
    store.put_many([TEA, COFFEE, U1_DOG])
    store.close()
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(c) + "\n" for c in ELSEWHERE))

    summary = night(str(cases), 0)

    store = SqliteStore(home / "memlife.db")
    try:
        tea = store.get("m-tea")
        assert tea is not None and tea.status is Status.active, summary["gate"]
    finally:
        store.close()


@pytest.mark.parametrize(
    "case_id",
    [
        {"fact": "Diagnosed with hepatitis C"},
        ["Diagnosed with hepatitis C"],
        "Diagnosed with hepatitis C in March. " * 8,
    ],  # fmt: skip
    ids=["mapping", "list", "too-long"],
)
def test_a_refused_case_id_is_not_echoed_in_the_error(tmp_path: Path, case_id: Any) -> None:
    """A case's fields were pasted one place down: a fact sits where the id goes (a mapping,
    a list, a whole sentence over the id's 256 characters). The id is refused, and the error
    (which reaches logs and Prefect's state through the run's start) must name the case by
    its place and the field, never echo the refused value."""
    from memlife.evalset import EvalSetError, load_cases

    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps({"id": case_id, "query": "q", "actor_id": ACTOR,
                                "forbidden": ["m-1"]}) + "\n")  # fmt: skip
    with pytest.raises(EvalSetError) as caught:
        load_cases(path)
    message = str(caught.value)
    assert "id" in message and "case 1" in message, message
    assert "hepatitis" not in message, message


def test_a_gated_dry_run_asks_no_model_for_its_answer_checks(
    home: Path, tmp_path: Path, model: MessagesServer
) -> None:
    """A key is set and the set's case checks the model's answer. A dry run calls no model
    unless ``--with-model`` (docs/evaluation.md), its gate included: the answer checks are
    skipped (``answers: skipped``), no request reaches the Messages API. Mutation:
    ``paid = True`` in run_commit.run_gate (the dry run's gate pays for answers)."""
    home.mkdir()
    store = SqliteStore(home / "memlife.db")
    store.put_many([U1_DOG, *U2])
    store.close()
    dog = {"id": "dog", "query": "What is the dog called?", "actor_id": ACTOR,
           "must_retrieve": ["m-dog"], "answer_must_include": ["Rex"]}  # fmt: skip
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(dog) + "\n")

    code, out, err = invoke("run", "--engine", "local", "--dry-run", "--json",
                            "--eval-cases", str(cases), "--now", NOW.isoformat())  # fmt: skip

    assert code == 0, (out, err)
    assert json.loads(out)["gate"]["answers"] == "skipped"
    assert model.message_requests == []
