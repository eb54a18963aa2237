"""Repeated episodic statements: with a model, one semantic record; offline, merged repeats
that stay episodic (an extractive copy of an event is no lasting fact).

Real SDK against the local Messages API server, SQLite store, one nightly apply run.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.consolidate.prompts import TOOL_NAME
from memlife.model import MemoryRecord, MemoryType, Source, Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer, tool_use_reply

DAY1 = datetime(2026, 4, 6, 7, tzinfo=UTC)
NIGHT = DAY1 + timedelta(days=30)
NS = "/users/u-3/journal"  # deletion not enforced: no evaluation set needed to consolidate
RUN = "Went for a run along the river before work."
RECORD = re.compile(r'<(memory_\w+) id="([^"]+)"[^>]*>\n(.*?)\n</\1>', re.S)


def _seed(home: Path, times: int) -> list[str]:
    store = SqliteStore(home / "memlife.db")
    recs = [
        MemoryRecord(
            id=f"e-{i}",
            actor_id="u-3",
            namespace=NS,
            memory_type="episodic",
            subject="exercise",
            content=RUN,
            source=Source.user_stated,
            created_at=DAY1 + timedelta(days=7 * i),
        )  # fmt: skip
        for i in range(times)
    ]
    store.put_many(recs)
    store.close()
    return [r.id for r in recs]


def _replacements(home: Path) -> list[MemoryRecord]:
    store = SqliteStore(home / "memlife.db")
    try:
        return [r for r in store.iter_all() if r.id.startswith("r-")]
    finally:
        store.close()


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("MEMLIFE_HOME", str(h))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("MEMLIFE_EVAL_CASES", raising=False)
    return h


def test_with_a_model_a_repeated_event_becomes_one_semantic_record(
    home: Path, monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    prompts: list[str] = []

    def answer(body: dict[str, Any]):
        text = body["messages"][0]["content"]
        text = text if isinstance(text, str) else "".join(b.get("text", "") for b in text)
        prompts.append(text)
        ids = sorted(rid for _, rid, _ in RECORD.findall(text))
        fact = "Goes for a run along the river before work."
        return tool_use_reply(TOOL_NAME, {"summary": fact, "claims": [fact], "confidence": 0.9,
                                          "source_ids": ids, "relation": "duplicate"})  # fmt: skip

    messages_server.set_handler(answer)
    ids = _seed(home, 3)
    summary = run_local(RunConfig(dry_run=False, now=NIGHT))
    assert summary.status == "success" and summary.model["calls"] == 1
    assert "same event again and again" in prompts[0]
    [repl] = _replacements(home)
    assert repl.memory_type is MemoryType.semantic and repl.status is Status.active
    assert sorted(repl.provenance.supersedes) == ids
    assert summary.other["episodic_promoted"] == 1


def test_twice_is_not_yet_a_habit_and_offline_repeats_stay_episodic(home: Path) -> None:
    _seed(home, 4)
    summary = run_local(RunConfig(dry_run=False, now=NIGHT))  # offline: extractive
    [repl] = _replacements(home)
    assert repl.memory_type is MemoryType.episodic and repl.content == RUN
    assert summary.other.get("episodic_promoted", 0) == 0


def test_below_the_threshold_no_promotion_even_with_a_model(
    home: Path, monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)

    def answer(body: dict[str, Any]):
        text = body["messages"][0]["content"]
        assert "same event again and again" not in text
        ids = sorted(rid for _, rid, _ in RECORD.findall(text))
        return tool_use_reply(TOOL_NAME, {"summary": RUN, "claims": [RUN], "confidence": 0.9,
                                          "source_ids": ids, "relation": "duplicate"})  # fmt: skip

    messages_server.set_handler(answer)
    _seed(home, 2)
    run_local(RunConfig(dry_run=False, now=NIGHT))
    [repl] = _replacements(home)
    assert repl.memory_type is MemoryType.episodic
