"""Audit 53a (session 53): a group sent to review leaves no unkeyed content commitment in
the run receipt.

A group whose model answers are refused MAX_REJECTIONS times is listed in the night's
receipt ``failures`` by ``group_key``: ``Group.consolidation_key()``, a plain sha256 over
actor, namespace, subject and every member's ``id:sha256(content)``. Audits 50c/50c2 keyed
the replacement id for this very reason and left this key as it was, on the grounds that it
"never leaves the store or the model request"; it does, into write-once evidence kept for
years. After the members are erased, whoever reads the receipts confirms a guessed text of
the erased records (the ids are in the receipts, the subject is a word) by recomputing the
key: the keyed content hashes (evidence_key.py) hid nothing (invariants 5, 11).

Real components: the SQLite store, the anthropic SDK against the local Messages API fake,
the local pipeline and the file sink; the erasure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.consolidate import Group
from memlife.consolidate.prompts import TOOL_NAME
from memlife.erase import erase
from memlife.model import MemoryRecord, Source
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer, Reply, tool_use_reply

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
NIGHT = T0 + timedelta(days=20)
NS = "/users/u-1/notes"  # not enforced: consolidation runs without an evaluation set
TEXTS = {"b-1": "I drink black coffee every morning.", "b-2": "I drink black coffee each morning."}


def rec(rid: str, day: int) -> MemoryRecord:
    t = T0 + timedelta(days=day)
    return MemoryRecord(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic",
                        subject="coffee", content=TEXTS[rid], owner="u-1",
                        source=Source.user_stated, created_at=t, last_verified_at=t)  # fmt: skip


def invented(body: dict[str, Any]) -> Reply:
    """An answer the grounding check refuses every time (an invented clause)."""
    summary = f"{TEXTS['b-2']} The user also owes money to loan sharks."
    out = {"summary": summary, "claims": [summary], "confidence": 0.9,
           "source_ids": sorted(TEXTS)}  # fmt: skip
    return tool_use_reply(TOOL_NAME, out)


@pytest.fixture()
def run_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer) -> Iterator[Path]:  # fmt: skip
    home = tmp_path / "home"
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    monkeypatch.delenv("MEMLIFE_EVAL_CASES", raising=False)
    monkeypatch.delenv("MEMLIFE_STORE", raising=False)
    home.mkdir()
    s = SqliteStore(home / "memlife.db")
    s.put_many([rec("b-1", 1), rec("b-2", 6)])
    s.close()
    messages_server.set_handler(invented)
    yield home


def _to_review(home: Path) -> tuple[dict[str, Any], list[str]]:
    """Nights until the group goes to review; (the failure entry, every receipt's text)."""
    for day in range(3):
        summary = run_local(RunConfig(dry_run=False, now=NIGHT + timedelta(days=day)))
        receipt = json.loads(Path(summary.receipt or "").read_text())
    (entry,) = [f for f in receipt["failures"] if f.get("review")]
    store = SqliteStore(home / "memlife.db")
    try:
        assert erase(store, "u-1", subject="coffee", now=NIGHT + timedelta(days=3))["erased"]
    finally:
        store.close()
    texts = [p.read_text() for p in (home / "receipts").rglob("*.json")]
    return entry, texts


def _guessed(texts: dict[str, str]) -> str:
    """The key a reader of the receipts computes from guessed member texts."""
    members = [rec(rid, 1).model_copy(update={"content": c}) for rid, c in texts.items()]
    return Group("k", "u-1", NS, "coffee", members).consolidation_key()


def test_receipts_do_not_confirm_a_guess_of_the_erased_texts(run_env: Path) -> None:
    entry, texts = _to_review(run_env)
    assert entry["code"] == "UNGROUNDED_CLAIM" and entry["action"] == "consolidate"
    right = _guessed(TEXTS)
    wrong = _guessed({**TEXTS, "b-1": "I drink green tea every morning."})
    assert not [t for t in texts if right in t]  # the right guess is confirmed by nothing
    assert not [t for t in texts if wrong in t]


def test_control_the_group_is_still_named_in_the_receipt(run_env: Path) -> None:
    entry, _ = _to_review(run_env)
    assert entry["review"] is True and entry["attempts"] == 3 and entry["group_key"]
