"""Audit 51iii (session 51): a case's model answer is asked again for every view of the gate.

With a model key set, an apply night's gate checks each case's answer (``answer_must_include``)
on the "before" view and again on every "after" view, with a fresh request each time, at the
API's default temperature. A case whose retrieval the night does not touch (the same records,
in the same order, before and after) can still flip from pass to fail between the two
requests: the verdict reads that as CASE_REGRESSED, "the run made it fail". When the case's
actor owns no deletion, no actor can be named, so every deletion of the night, another
tenant's included, is held back and quarantined, on the model's word alone.

Real components: the SQLite store, the local engine, real MiniLM, the real Anthropic SDK
against the local Messages API server (tests/fakes/messages_api.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memlife.model import Status
from memlife.pipeline import run_local
from memlife.run_types import RunConfig
from tests.fakes.messages_api import MessagesServer, text_reply
from tests.support.gate import ACTOR, NOW, rec, store_at, ttl_policy

DOG = rec("m-dog", "facts", "Has a dog named Rex.", subject="pet", age=30)
# u-2's old fact: past the short semantic TTL, a judgement deletion in an enforced namespace
U2_OLD = rec("m-u2-car", "facts", "Drives a red hatchback.", subject="car", actor="u-2", age=100)
DOG_CASE = {"id": "dog", "query": "What is the dog called?", "actor_id": ACTOR,
            "must_retrieve": ["m-dog"], "answer_must_include": ["Rex"], "k": 3}  # fmt: skip


@pytest.fixture()
def model(monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer) -> MessagesServer:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    return messages_server


def _night(home: Path, tmp_path: Path, model: MessagesServer, answers: list[str]) -> Any:
    home.mkdir(exist_ok=True)
    store = store_at(home)
    store.put_many([DOG, U2_OLD])
    store.close()
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(DOG_CASE) + "\n")
    asked: list[str] = []

    def answer(body: dict[str, Any]) -> Any:  # the n-th answer to the same question
        asked.append(json.dumps(body["messages"]))
        return text_reply(answers[min(len(asked), len(answers)) - 1])

    model.set_handler(answer)
    summary = run_local(RunConfig(dry_run=False, now=NOW, policy=ttl_policy(tmp_path, 60),
                                  eval_cases=str(cases)))  # fmt: skip
    return summary, asked


def test_an_answer_that_differs_on_an_unchanged_retrieval_blocks_nothing(
    home: Path, tmp_path: Path, model: MessagesServer
) -> None:
    """u-1's dog case retrieves the same record before and after (the night changes nothing
    of u-1); the model says "Rex" the first time and hedges the second. Must hold: the night
    is not blocked by it, and u-2's deletion goes ahead; the gate asked once per distinct
    retrieval (per replica)."""
    summary, asked = _night(home, tmp_path, model,
                            ["The dog is called Rex.", "I am not sure what the dog is called."])  # fmt: skip

    gate = summary.gate
    assert gate is not None and gate["answers"] == "model"
    assert not gate["blocked"], gate["reasons"]
    assert summary.status == "success"
    assert len(asked) == 1, len(asked)  # one question on one retrieval
    store = store_at(home)
    try:
        assert store.get("m-u2-car") is None  # u-2's deletion went ahead
    finally:
        store.close()


def test_an_answer_that_fails_on_every_view_is_still_reported(
    home: Path, tmp_path: Path, model: MessagesServer
) -> None:
    """Control: a model that never names the dog fails the case before and after. The case
    is failing, not regressed: the night is not blocked for it (a warning), and u-2's
    deletion goes ahead."""
    summary, _ = _night(home, tmp_path, model, ["I am not sure what the dog is called."])
    gate = summary.gate
    assert gate is not None and "dog" in gate["failed_cases"]
    assert "CASE_REGRESSED" not in gate["reasons"]
    store = store_at(home)
    try:
        assert store.get("m-u2-car") is None
        dog = store.get("m-dog")
        assert dog is not None and dog.status is Status.active
    finally:
        store.close()
