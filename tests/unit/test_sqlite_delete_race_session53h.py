"""Audit 53h: a nightly delete re-reads its record, then deletes it in a later statement;
an agent's write in another process between the two must not be deleted with it.

The delete applier (apply/appliers/delete.py) re-reads each candidate, checks that it is
still past its lifetime (or still forgotten, still quarantined), drops its cached vectors
and derived rows, and only then runs ``SqliteStore.delete_many``. That DELETE re-checks,
in its own transaction, the hold and the row's actor, namespace and text (AS_READ's first
three), but not its status or lifetime. An agent that writes the same item again in that
window (a LangGraph ``put`` of the same key and value: the record active again, created
now, no deadline) lost its write: the night deleted the fresh record and receipted the
delete as the expiry or the elapsed grace of the record it had read.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from memlife.apply.appliers import delete as delete_applier
from memlife.integrations.langgraph import record_id
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

REPO = Path(__file__).resolve().parents[2]
NS = "/users/u-1/facts"
TEXT = "The user parks in bay 42 on weekdays."
RID = record_id("u-1", NS, "parking")  # the item's id: the agent's put addresses it by key
# by the real clock: the agent's write reads it (an item past its deadline is a new item)
NIGHT = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _policy(tmp_path: Path) -> str:
    data = yaml.safe_load((REPO / "policies/default.yaml").read_text())
    data["version"] = "test-audit53h-ungated"
    data["gate"]["required"] = False
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _seed(db: Path, how: str) -> None:
    """The agent's item (a LangGraph put, so its id is the key's), 100 days old: past its
    deadline ('expired'), or forgotten 30 days ago, past its grace ('forgotten')."""
    with SqliteStore(db) as store:
        store.put_many([MemoryRecord.model_validate({
            "id": RID, "actor_id": "u-1", "namespace": NS, "memory_type": "semantic",
            "subject": "parking", "content": TEXT, "owner": "t", "confidence": 0.9,
            "source": "user_stated", "created_at": NIGHT - timedelta(days=100),
            **({"expires_at": NIGHT - timedelta(days=1)} if how == "expired" else
               {"status": "pending_delete", "status_changed_at": NIGHT - timedelta(days=30)}),
        })])  # fmt: skip


def _agent_puts_it_again(db: Path) -> None:
    """Another process: the agent stores the same item again (LangGraph put, no ttl)."""
    code = f"""
        from memlife.integrations.langgraph import MemlifeStore
        store = MemlifeStore({f"sqlite:///{db}"!r})
        store.put(("users", "u-1", "facts"), "parking", {{"content": {TEXT!r}}})
        store.close()
    """
    subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=True, cwd=REPO,
                   env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                   timeout=300)  # fmt: skip


def _row(db: Path) -> tuple[str, str | None] | None:
    con = sqlite3.connect(db)
    try:
        row = con.execute("SELECT status, expires_at FROM records WHERE id=?", (RID,)).fetchone()
        return None if row is None else (row[0], row[1])
    finally:
        con.close()


def _count(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute("SELECT count(*) FROM records").fetchone()[0])
    finally:
        con.close()


def _night(monkeypatch: pytest.MonkeyPatch, policy: str, db: Path, race: bool) -> dict[str, object]:
    """The night; with ``race``, the agent's put runs after the delete applier's re-read,
    before its DELETE (while the night drops the record's cached vectors)."""
    raced: list[bool] = []
    real = delete_applier.forget_content

    def put_then(*args: object) -> None:
        if race and not raced:
            _agent_puts_it_again(db)
            assert _row(db) == ("active", None)  # written again: active, no deadline
            assert _count(db) == 1  # over the item's own row, not beside it
            raced.append(True)
        real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(delete_applier, "forget_content", put_then)
    night = run_local(RunConfig(dry_run=False, now=NIGHT, policy=policy)).as_json()
    monkeypatch.setattr(delete_applier, "forget_content", real)
    assert raced == ([True] if race else []), "the race did not happen"
    return night


@pytest.mark.parametrize("how", ["expired", "forgotten"])
def test_an_item_the_agent_writes_again_during_the_delete_is_not_deleted(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    db = home / "memlife.db"
    _seed(db, how)
    _night(monkeypatch, _policy(tmp_path), db, race=True)
    assert _row(db) == ("active", None), "the agent's fresh write was deleted by the night"


@pytest.mark.parametrize("how", ["expired", "forgotten"])
def test_control_unraced_the_night_deletes_it(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    db = home / "memlife.db"
    _seed(db, how)
    night = _night(monkeypatch, _policy(tmp_path), db, race=False)
    assert _row(db) is None
    assert night["lifecycle"]["deleted"] == 1, night  # type: ignore[index]


def _stored(db: Path, how: str) -> tuple[SqliteStore, MemoryRecord]:
    _seed(db, how)
    store = SqliteStore(db)
    was = store.get(RID)
    assert was is not None
    return store, was


def test_the_store_refuses_a_night_delete_of_a_row_made_active_again(tmp_path: Path) -> None:
    """The same, one level down: the row as read is forgotten; written active again (same
    text) by another connection before the DELETE, it is STALE_PRECONDITION, kept."""
    store, was = _stored(tmp_path / "m.db", "forgotten")
    other = sqlite3.connect(tmp_path / "m.db")
    other.execute("UPDATE records SET status='active' WHERE id=?", (RID,))
    other.commit()
    other.close()
    with store:
        res = store.delete_many([RID], expect={RID: was})
        assert [f.code for f in res.failed] == ["STALE_PRECONDITION"], res
        assert store.get(RID) is not None


def test_control_a_row_whose_seconds_are_stored_another_way_is_still_deleted(
    tmp_path: Path,
) -> None:
    """Control: a row whose seconds column another tool (or an older memlife, from a naive
    time in a local zone: an hour off) computed another way, its status and times as text
    unchanged, is deleted as before."""
    store, was = _stored(tmp_path / "m.db", "expired")
    with store:
        store.connection.execute("UPDATE records SET created_ts = created_ts + 3600")
        assert store.delete_many([RID], expect={RID: was}).succeeded == [RID]


def test_control_an_erasure_takes_the_row_whatever_its_status_now(tmp_path: Path) -> None:
    """Control: an erasure (``any_text``) deletes the row even once it is active again."""
    store, was = _stored(tmp_path / "m.db", "forgotten")
    with store:
        store.connection.execute("UPDATE records SET status='active', expires_at=NULL")
        res = store.delete_many([RID], expect={RID: was}, any_text=True)
        assert res.succeeded == [RID] and store.get(RID) is None
