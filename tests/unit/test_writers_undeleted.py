"""Audit 43d (session 43): an agent (another process, one MEMLIFE_HOME) puts back, through the LangGraph
store, an item it deleted more than the grace ago, while the night commits. The night had
planned the forgotten record's delete (``PENDING_GRACE``); the delete re-checks the hold,
the scope and the content hash, not that the record is still ``pending_delete``. An agent
that deletes a key and later puts the same value again gets the same record id and content:
the night deletes the item the agent had just written, receipted as a forgotten record's
end. What must hold: a record written active again since the plan is not deleted for a
grace it is no longer in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from memlife import run_commit  # noqa: E402
from memlife.integrations.langgraph import MemlifeStore, record_id  # noqa: E402
from memlife.model import Status  # noqa: E402
from memlife.pipeline import RunConfig, run_local  # noqa: E402
from memlife.stores.sqlite import SqliteStore  # noqa: E402
from tests.support.cli import invoke  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NS = ("users", "u-1", "facts")
VALUE = {"content": "Drinks green tea every morning."}
NIGHT = datetime.now(UTC).replace(microsecond=0)


def _put_in_another_process(db: Path) -> None:
    """The agent's graph, in its own interpreter: the item written again."""
    script = textwrap.dedent(f"""
        from memlife.integrations.langgraph import MemlifeStore
        s = MemlifeStore({f"sqlite:///{db}"!r})
        s.put({NS!r}, "tea", {VALUE!r})
        s.close()
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", script], check=True, cwd=REPO, env=env, timeout=300)


# fmt: skip
def test_an_item_put_back_while_the_night_commits_is_not_deleted_as_forgotten(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The item was deleted ten days ago (past the 7-day grace); the agent puts it back
    between the night's groups and its deletions. What must hold: the item is there after
    the night, and the night's receipts verify."""
    db = home / "memlife.db"
    graph = MemlifeStore(f"sqlite:///{db}")
    graph.put(NS, "tea", VALUE)
    graph.delete(NS, "tea")
    graph.close()
    rid = record_id("u-1", "/users/u-1/facts", "tea")
    with SqliteStore(db) as store:  # forgotten ten days ago
        store.set_status([rid], Status.pending_delete, at=NIGHT - timedelta(days=10))
    put_back: list[bool] = []
    real = run_commit.checkpoint

    def put_then(point: str) -> None:
        if point == "after_commit_groups" and not put_back:  # planned; deletions not yet
            _put_in_another_process(db)
            put_back.append(True)
        real(point)

    monkeypatch.setattr(run_commit, "checkpoint", put_then)
    night = run_local(RunConfig(dry_run=False, now=NIGHT)).as_json()
    assert put_back, "the race did not happen"
    code, out, _ = invoke("receipts", "verify", night["run_id"])
    assert code == 0, out
    graph = MemlifeStore(f"sqlite:///{db}")
    try:
        item = graph.get(NS, "tea")
    finally:
        graph.close()
    assert item is not None and item.value == VALUE, json.dumps(night["counts"])


# fmt: skip
def test_an_expired_item_put_again_while_the_night_commits_is_not_deleted_as_expired(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The item's deadline passed an hour ago; the agent puts it again (no TTL) between the
    night's groups and its deletions. What must hold: the item is there after the night."""
    db = home / "memlife.db"
    graph = MemlifeStore(f"sqlite:///{db}")
    graph.put(NS, "tea", VALUE)
    graph.close()
    rid = record_id("u-1", "/users/u-1/facts", "tea")
    with SqliteStore(db) as store:  # its deadline (an earlier put's TTL) passed an hour ago
        was = store.get(rid)
        assert was is not None
        store.put_many([was.model_copy(update={"expires_at": NIGHT - timedelta(hours=1)})])
    put_back: list[bool] = []
    real = run_commit.checkpoint

    def put_then(point: str) -> None:
        if point == "after_commit_groups" and not put_back:  # planned; deletions not yet
            _put_in_another_process(db)
            put_back.append(True)
        real(point)

    monkeypatch.setattr(run_commit, "checkpoint", put_then)
    night = run_local(RunConfig(dry_run=False, now=NIGHT)).as_json()
    assert put_back, "the race did not happen"
    graph = MemlifeStore(f"sqlite:///{db}")
    try:
        item = graph.get(NS, "tea")
    finally:
        graph.close()
    assert item is not None and item.value == VALUE, json.dumps(night["counts"])
