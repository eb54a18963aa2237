"""Session 27 findings: another process's writes must never be taken for this process's
own, nor hidden by a row this process dropped from its in-memory index.

1. A commit by another process while ``remember`` (or ``set_status``) was between its
   staleness check and its own write was absorbed as our own: the shard was never
   re-checked (recall missed the other's fact) and SQLite's duplicate scan was skipped
   (a second active copy of one text).
2. A row dropped from the index during recall or remember (no longer active in the store)
   left the shard's fingerprint as loaded: when another process made the record active
   again, the store matched that fingerprint and the record was never recalled again.

Each window is forced with a real second interpreter on the same SQLite file, run from a
hook at the exact point (after the embedding, before the status write, after ranking,
before the refresh); the last test is the unforced race of two agent processes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import memlife.online.memory as online
from memlife import Memory
from memlife.ledger import AccessLedger
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore

REPO = Path(__file__).resolve().parents[2]
NS = "/users/u1/facts"
PET = "Has a grey cat called Maria."
TEA = "Drinks only green tea, never coffee."
TIMEOUT = 300  # generous: two loaded cores


@pytest.fixture()
def db(home: Path) -> Path:
    return home / "memlife.db"


@pytest.fixture()
def mem(db: Path, home: Path) -> Iterator[LongTermMemory]:
    store = SqliteStore(db)
    m = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    yield m
    m.close()
    store.close()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def other_process(db: Path, body: str) -> None:
    """Run ``body`` in another interpreter with ``m``, a LongTermMemory on the same file
    (``NS`` the namespace), committed before this returns."""
    script = (
        textwrap.dedent(f"""
        from memlife.ledger import AccessLedger
        from memlife.online.memory import LongTermMemory
        from memlife.stores.sqlite import SqliteStore
        NS = {NS!r}
        s = SqliteStore({str(db)!r})
        m = LongTermMemory(s, ledger=AccessLedger({str(db.parent / "ledger-other")!r}))
    """)
        + textwrap.dedent(body)
        + "\nm.close()\ns.close()\n"
    )
    subprocess.run(
        [sys.executable, "-c", script], check=True, cwd=REPO, env=_env(), timeout=TIMEOUT
    )


def once(real: Callable[..., Any], before: Callable[[], None] | None = None,
         after: Callable[[], None] | None = None) -> Callable[..., Any]:  # fmt: skip
    """``real``, with ``before``/``after`` run around its first call only."""
    fired: list[bool] = []

    def hooked(*args: Any, **kw: Any) -> Any:
        first = not fired
        fired.append(True)
        if first and before is not None:
            before()
        out = real(*args, **kw)
        if first and after is not None:
            after()
        return out

    return hooked


def contents(mem: LongTermMemory, query: str, k: int = 5) -> list[str]:
    return [h.record.content for h in mem.recall("u1", query, k=k, namespace=NS, log=False)]


def duplicate_active(db: Path) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(
            "SELECT actor_id, namespace, norm_sha256, count(*) FROM records "
            "WHERE status='active' GROUP BY 1, 2, 3 HAVING count(*) > 1"
        ).fetchall()
    finally:
        con.close()


# -- 1: a foreign commit inside our own write window --------------------------------------


def test_foreign_remember_during_remember_is_not_taken_for_ours(
    mem: LongTermMemory, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem.remember("u1", NS, None, "Lives in Lisbon since 2019.")
    assert contents(mem, "Lives in Lisbon since 2019.")  # shard loaded and checked
    foreign = f"m.remember('u1', NS, None, {PET!r})"
    # the other process commits while this one embeds its new fact (before its insert)
    hooked = once(mem.cache.get_or_embed_texts, after=lambda: other_process(db, foreign))
    monkeypatch.setattr(mem.cache, "get_or_embed_texts", hooked)
    assert mem.remember("u1", NS, None, "Works as a nurse in Porto.").created
    monkeypatch.undo()

    assert PET in contents(mem, PET)  # the shard was re-checked: the other's fact is known
    again = mem.remember("u1", NS, None, PET)
    assert not again.created  # refreshed, not a second copy
    assert duplicate_active(db) == []


def test_foreign_remember_during_set_status_is_not_taken_for_ours(
    mem: LongTermMemory, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = mem.remember("u1", NS, None, "Lives in Lisbon since 2019.").record_id
    mem.remember("u1", NS, None, "Works as a nurse in Porto.")
    assert contents(mem, "Works as a nurse in Porto.")
    foreign = f"m.remember('u1', NS, None, {PET!r})"
    store = mem.store
    assert isinstance(store, SqliteStore)
    hooked = once(store.set_status_unless_held, before=lambda: other_process(db, foreign))
    monkeypatch.setattr(store, "set_status_unless_held", hooked)
    assert mem.forget([gone]) == [gone]
    monkeypatch.undo()

    assert PET in contents(mem, PET)
    assert not mem.remember("u1", NS, None, PET).created
    assert duplicate_active(db) == []


# -- 2: a dropped row, then the record made active again elsewhere ------------------------


@pytest.mark.parametrize("how", ["langgraph", "set_status"])
def test_row_dropped_by_recall_comes_back_when_restored_elsewhere(
    mem: LongTermMemory, db: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    from memlife.integrations.langgraph import MemlifeStore, record_id

    lg = MemlifeStore(f"sqlite:///{db}")
    lg.put(("users", "u1", "facts"), "drink", {"content": TEA})
    lg.close()
    rid = record_id("u1", NS, "drink")
    mem.remember("u1", NS, None, "Lives in Lisbon since 2019.")
    assert contents(mem, TEA)[0] == TEA

    def adapter(call: str) -> str:
        return f"from memlife.integrations.langgraph import MemlifeStore\n" \
               f"lg = MemlifeStore('sqlite:///{db}')\nlg.{call}\nlg.close()"  # fmt: skip

    if how == "langgraph":  # the adapter's delete, then its put of the same item (upsert)
        forget = adapter("delete(('users', 'u1', 'facts'), 'drink')")
        restore = adapter(f"put(('users', 'u1', 'facts'), 'drink', {{'content': {TEA!r}}})")
    else:
        forget = f"m.forget([{rid!r}])"
        restore = f"m.set_status([{rid!r}], 'active')"
    # forgotten while this process ranks: the hit is re-read, found inactive and dropped
    hooked = once(online.rank_sets, after=lambda: other_process(db, forget))
    monkeypatch.setattr(online, "rank_sets", hooked)
    assert TEA not in contents(mem, TEA)
    monkeypatch.undo()

    other_process(db, restore)
    back = mem.store.get(rid)
    assert back is not None and back.status.value == "active"
    for _ in range(2):  # not once by luck: every later recall
        assert contents(mem, TEA)[0] == TEA


def test_row_dropped_by_remember_comes_back_when_restored_elsewhere(
    mem: LongTermMemory, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rid = mem.remember("u1", NS, None, TEA).record_id
    mem.remember("u1", NS, None, "Lives in Lisbon since 2019.")
    assert contents(mem, TEA)[0] == TEA
    store = mem.store
    assert isinstance(store, SqliteStore)
    # forgotten between remember's read of the duplicate and its refresh: the refresh
    # fails, the row is dropped and the fact stored anew
    hooked = once(store.refresh_active, before=lambda: other_process(db, f"m.forget([{rid!r}])"))
    monkeypatch.setattr(store, "refresh_active", hooked)
    again = mem.remember("u1", NS, None, TEA)
    monkeypatch.undo()
    assert again.created and again.record_id != rid

    other_process(db, f"m.set_status([{rid!r}], 'active')")
    ids = {h.record.id for h in mem.recall("u1", TEA, k=5, namespace=NS, log=False)}
    assert {rid, again.record_id} <= ids


# -- the unforced race: two agent processes remembering at once ---------------------------

WRITER = """
import json, sys
from memlife import Memory

tag, other, n, url = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

def facts(t):
    things = ["apples", "books", "chairs", "lamps", "pens"]
    return [f"{t} fact number {i}: bought {i * 7 + 3} {things[i % 5]} in {['May', 'June', 'July'][i % 3]}."
            for i in range(n)]

def step(name):  # tell the test, then wait for its go
    print(name, flush=True)
    assert sys.stdin.readline().strip() == "go"

m = Memory(url)
m.recall("warm up", actor="u1")
step("ready")
for f in facts(tag):
    m.remember(f, actor="u1")
step("written")
everything = facts(tag) + facts(other)
missed = [f for f in everything if f not in [h.content for h in m.recall(f, actor="u1", k=5)]]
step("recalled")
created = [f for f in facts(other) if m.remember(f, actor="u1").created]
m.close()
print(json.dumps({"missed": missed, "created": created}), flush=True)
"""


def test_two_processes_remembering_at_once_see_each_other(db: Path) -> None:
    n = 25
    url = f"sqlite:///{db}"
    Memory(url).close()  # the schema, before two processes race to create it
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, tag, other, str(n), url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=_env(),
        )
        for tag, other in (("A", "B"), ("B", "A"))
    ]
    try:
        for name in ("ready", "written", "recalled"):
            for p in procs:  # both reached the step, then both go on at once
                assert p.stdout is not None
                assert p.stdout.readline().strip() == name
            for p in procs:
                assert p.stdin is not None
                p.stdin.write("go\n")
                p.stdin.flush()
        results = []
        for p in procs:
            out, _ = p.communicate(timeout=TIMEOUT)
            assert p.returncode == 0
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for got in results:
        assert got["missed"] == []  # every fact either process stored, recalled by both
        assert got["created"] == []  # the other's facts are duplicates, never stored again
    assert duplicate_active(db) == []
