"""The consolidation memo: a second night on an unchanged store sends nothing to the model.

Real SDK against the local Messages API server, real MiniLM, SQLite store. Three groups:
one the model keeps apart (a complement), one it merges, one in an enforced namespace that
an apply run without an evaluation set withholds. Night 2 (nothing changed) must make 0
requests, embed 0 texts and write nothing to the store; an edited member re-opens only
its own group.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.consolidate.prompts import TOOL_NAME
from memlife.model import MemoryRecord, Source, Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer, tool_use_reply

DAY1 = datetime(2026, 3, 2, 9, tzinfo=UTC)
NIGHT = DAY1 + timedelta(days=20)
NOTES, PREFS = "/users/u-1/notes", "/users/u-1/preferences"  # PREFS: deletion enforced
RECORD = re.compile(r'<(memory_\w+) id="([^"]+)"[^>]*>\n(.*?)\n</\1>', re.S)
WRITES = ("put_many", "set_status", "delete_many", "add_tombstones", "put_replacement",
          "insert_new")  # fmt: skip


def _rec(rid: str, ns: str, subject: str, content: str, day: int) -> MemoryRecord:
    return MemoryRecord(
        id=rid, actor_id="u-1", namespace=ns, memory_type="semantic", subject=subject,
        content=content, owner="u-1", source=Source.user_stated,
        created_at=DAY1 + timedelta(days=day), last_verified_at=DAY1 + timedelta(days=day),
    )  # fmt: skip


def answer(body: dict[str, Any]):
    """Allergies are complements (kept apart); anything else is one statement said twice."""
    text = body["messages"][0]["content"]
    text = text if isinstance(text, str) else "".join(b.get("text", "") for b in text)
    recs = {rid: content for _, rid, content in RECORD.findall(text)}
    newest = list(recs)[-1]
    relation = "complement" if "allergic" in text else "duplicate"
    return tool_use_reply(TOOL_NAME, {
        "summary": recs[newest], "claims": [recs[newest]], "confidence": 0.9,
        "source_ids": sorted(recs), "relation": relation,
    })  # fmt: skip


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer) -> dict:
    home = tmp_path / "home"
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    monkeypatch.delenv("MEMLIFE_EVAL_CASES", raising=False)
    home.mkdir()
    store = SqliteStore(home / "memlife.db")
    store.put_many([
        _rec("a-1", NOTES, "allergies", "I am allergic to peanuts.", 0),
        _rec("a-2", NOTES, "allergies", "I am also allergic to shellfish.", 5),
        _rec("b-1", NOTES, "coffee", "I drink black coffee.", 1),
        _rec("b-2", NOTES, "coffee", "I drink black coffee.", 6),
        _rec("c-1", PREFS, "tea", "I like green tea.", 2),
        _rec("c-2", PREFS, "tea", "I like green tea.", 7),
    ])  # fmt: skip
    store.close()
    messages_server.set_handler(answer)
    # count what reaches the store and the embedder by wrapping the real classes
    counts = {"writes": 0, "embedded": 0}
    for name in WRITES:
        orig = getattr(SqliteStore, name)

        def wrapped(self, *a, _orig=orig, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
            counts["writes"] += 1
            return _orig(self, *a, **kw)

        monkeypatch.setattr(SqliteStore, name, wrapped)
    from memlife.embed import MiniLMEmbedder

    embed = MiniLMEmbedder.embed

    def counted(self, texts, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        counts["embedded"] += len(texts)
        return embed(self, texts, *a, **kw)

    monkeypatch.setattr(MiniLMEmbedder, "embed", counted)
    return {"db": home / "memlife.db", "server": messages_server, "counts": counts}


def _records_digest(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT * FROM records ORDER BY id").fetchall()
    finally:
        con.close()


def _night(env: dict, at: datetime) -> tuple[dict, int, dict]:
    sent = len(env["server"].message_requests)
    env["counts"].update(writes=0, embedded=0)
    summary = run_local(RunConfig(dry_run=False, now=at))
    receipt = json.loads(Path(summary.receipt).read_text())
    return receipt, len(env["server"].message_requests) - sent, dict(env["counts"])


def _status(db: Path) -> dict[str, Status]:
    store = SqliteStore(db)
    try:
        return {r.id: r.status for r in store.iter_all()}
    finally:
        store.close()


def test_second_night_on_an_unchanged_store_calls_no_model(env: dict) -> None:
    first, calls, _ = _night(env, NIGHT)
    assert calls == 2  # allergies (kept apart) and coffee (merged); tea is withheld unread
    other = first["other_counts"]
    assert other["consolidation_kept_apart"] == 1 and other["gate_withheld_groups"] == 1
    assert first["counts"]["consolidated"] == 1 and first["gate"]["withheld_groups"] == 1
    status = _status(env["db"])
    assert status["a-1"] is status["a-2"] is Status.active  # a complement: both stay
    assert status["b-1"] is status["b-2"] is Status.superseded
    assert status["c-1"] is status["c-2"] is Status.active  # withheld: no evaluation set

    before = _records_digest(env["db"])
    second, calls, counts = _night(env, NIGHT + timedelta(days=1))
    assert calls == 0 and second["model"]["calls"] == 0
    assert counts == {"writes": 0, "embedded": 0}
    assert _records_digest(env["db"]) == before
    assert second["other_counts"]["consolidation_unchanged"] == 1
    assert second["other_counts"]["gate_withheld_groups"] == 1
    assert second["gate"]["withheld_groups"] == 1  # still reported as withheld

    # an edited member re-opens its group, and only that one
    store = SqliteStore(env["db"])
    edited = store.get("a-1").model_copy(
        update={"content": "I am allergic to peanuts and cashews."}
    )
    store.put_many([edited])
    store.close()
    third, calls, _ = _night(env, NIGHT + timedelta(days=2))
    assert calls == 1 and third["other_counts"]["consolidation_kept_apart"] == 1
    # a new member re-opens it too
    store = SqliteStore(env["db"])
    store.put_many([_rec("a-3", NOTES, "allergies", "I am allergic to sesame as well.", 9)])
    store.close()
    _, calls, _ = _night(env, NIGHT + timedelta(days=3))
    assert calls == 1
    _, calls, counts = _night(env, NIGHT + timedelta(days=4))
    assert calls == 0 and counts == {"writes": 0, "embedded": 0}


def test_another_model_or_policy_reopens_a_settled_group(env: dict, monkeypatch) -> None:
    _night(env, NIGHT)
    _, calls, _ = _night(env, NIGHT + timedelta(days=1))
    assert calls == 0
    monkeypatch.setenv("MEMLIFE_MODEL", "claude-opus-4-1")  # a better model judges again
    _, calls, _ = _night(env, NIGHT + timedelta(days=2))
    assert calls == 1


def _dry(env: dict, at: datetime) -> tuple[dict, int]:
    sent = len(env["server"].message_requests)
    summary = run_local(RunConfig(dry_run=True, now=at))
    receipt = json.loads(Path(summary.receipt).read_text())
    return receipt, len(env["server"].message_requests) - sent


def _memo_rows(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT * FROM consolidation_outcomes ORDER BY memo_key").fetchall()
    finally:
        con.close()


def test_a_dry_run_reads_the_memo_and_never_writes_it(env: dict) -> None:
    before, calls = _dry(env, NIGHT)
    assert calls == 0  # a dry run estimates; it sends nothing
    # allergies, coffee, tea: a dry run withholds nothing for the missing evaluation set
    assert before["model"]["estimated_calls"] == 3
    _night(env, NIGHT)  # allergies kept apart (memo), coffee merged, tea withheld unread
    memo = _memo_rows(env["db"])
    assert len(memo) == 1
    records = _records_digest(env["db"])
    after, calls = _dry(env, NIGHT + timedelta(days=1))
    assert calls == 0
    # the kept-apart group is settled for the apply run's consolidator (the Messages API
    # model), although the dry run itself consolidates extractively: only tea is left
    assert after["model"]["estimated_calls"] == 1
    assert after["other_counts"]["consolidation_unchanged"] == 1
    assert _memo_rows(env["db"]) == memo and _records_digest(env["db"]) == records
    # an edited member re-opens the group for the dry run's estimate too
    store = SqliteStore(env["db"])
    store.put_many([store.get("a-1").model_copy(update={"content": "Allergic to cashews."})])
    store.close()
    edited, _ = _dry(env, NIGHT + timedelta(days=2))
    assert edited["model"]["estimated_calls"] == 2


def test_memo_reader_creates_nothing_and_only_reads(tmp_path: Path, monkeypatch) -> None:
    from memlife.journal import SqliteJournal, open_memo_reader

    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    store = SqliteStore(tmp_path / "memlife.db")
    try:
        assert open_memo_reader(store) is None  # no journal yet: nothing settled
        tables = store.connection.execute("SELECT name FROM sqlite_master").fetchall()
        assert ("consolidation_outcomes",) not in tables  # and none was created
    finally:
        store.close()

    class NotSqlite:  # a store without a SQLite connection: the journal is its own file
        pass

    assert open_memo_reader(NotSqlite()) is None and not (tmp_path / "journal.db").exists()
    journal = SqliteJournal.at(tmp_path / "journal.db")
    journal.remember_outcome("k1", "u-1", NOTES, "KEPT_APART", None, NIGHT)
    read = open_memo_reader(NotSqlite())
    assert read is not None
    assert read(["k1", "k2"]) == {"k1": {"outcome": "KEPT_APART", "retry_at": None}}
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        read.args[0].execute("DELETE FROM consolidation_outcomes")
