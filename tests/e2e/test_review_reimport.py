"""A record a reviewer took out of service comes back (session 30 operator review): the
same file imported again restored a record a reviewer had deleted, and the night counted
its finding answered (`review_answered`) under the resolved `delete`: nobody was asked
again, and the record stayed served for good. A `delete` or `supersede` answers a finding
only while the record stays out; back and active, it is asked again."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.pipeline import RunConfig, run_local
from memlife.review_queue import ReviewQueue, resolve
from memlife.stores.sqlite import SqliteStore

NIGHT1 = datetime(2026, 3, 2, 3, tzinfo=UTC)
LINES = [
    {"id": "n-1", "actor_id": "u-7", "namespace": "/team/notes", "memory_type": "semantic",
     "content": "The deploy key rotates every quarter.", "created_at": "2026-03-01T08:00:00Z",
     "source": "agent_inferred", "confidence": 0.6},
    {"id": "n-2", "actor_id": "u-7", "namespace": "/team/notes", "memory_type": "semantic",
     "content": "The printer is on the third floor.", "created_at": "2026-03-01T08:00:00Z",
     "source": "agent_inferred", "confidence": 0.6},
]  # fmt: skip


def _items(db: Path, rid: str) -> list:
    with SqliteStore(db) as store:
        found = ReviewQueue.for_store(store).list(states=("open", "disputed", "resolved"))
    return [i for i in found if i.record_id == rid and i.reason == "MISSING_OWNER"]


def _imported_and_one_night(home: Path, tmp_path: Path) -> tuple[Path, CliRunner, Path]:
    """LINES imported through the CLI and one night run: the items are open."""
    src = tmp_path / "notes.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in LINES))
    runner = CliRunner()
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0
    run_local(RunConfig(dry_run=False, now=NIGHT1))
    return src, runner, home / "memlife.db"


@pytest.mark.parametrize("decision", ["delete", "supersede"])
def test_a_record_a_reviewer_removed_and_imported_again_is_asked_about_again(
    offline_home: Path, tmp_path: Path, decision: str
) -> None:
    src, runner, db = _imported_and_one_night(offline_home, tmp_path)
    (item,) = _items(db, "n-1")
    with SqliteStore(db) as store:
        resolve(store, item.item_id, decision, "ana", by="n-2" if decision == "supersede" else None,
                now=NIGHT1 + timedelta(hours=2))  # fmt: skip
        back = store.get("n-1")
        assert back is None or back.status.value != "active"
        if back is not None:  # superseded: the file's active copy cannot overwrite it
            store.delete_many(["n-1"])  # as a purge of superseded records would, later
    res = runner.invoke(app, ["import", str(src)])
    assert res.exit_code == 0, res.output
    with SqliteStore(db) as store:
        assert store.get("n-1") is not None and store.get("n-1").status.value == "active"  # type: ignore[union-attr]
    night = run_local(RunConfig(dry_run=False, now=NIGHT1 + timedelta(days=1)))
    open_now = [i for i in _items(db, "n-1") if i.state == "open"]
    assert len(open_now) == 1 and open_now[0].item_id != item.item_id, _items(db, "n-1")
    assert night.other.get("review_answered", 0) == 0, night.other


def test_an_import_names_records_a_receipted_removal_had_taken_out(
    offline_home: Path, tmp_path: Path
) -> None:
    """The same file imported again brought a reviewer-deleted record back with no word:
    its run's receipts then say "deleted" of a record that is there. Now it is named
    (PREVIOUSLY_DELETED, with the run); the same id holding other content is a reused id."""
    src, runner, db = _imported_and_one_night(offline_home, tmp_path)
    items = {i.record_id: i for i in _items(db, "n-1") + _items(db, "n-2")}
    with SqliteStore(db) as store:
        runs = {rid: resolve(store, items[rid].item_id, "delete", "ana",
                             now=NIGHT1 + timedelta(hours=2))["run_id"] for rid in items}  # fmt: skip
        assert store.get("n-1") is None and store.get("n-2") is None
    reused = [LINES[0], {**LINES[1], "content": "The printer moved to the fourth floor."}]
    src.write_text("".join(json.dumps(line) + "\n" for line in reused))
    res = runner.invoke(app, ["import", str(src), "--json"])
    assert res.exit_code == 0, res.output
    warned = [w for w in json.loads(res.stdout)["warnings"] if w["code"] == "PREVIOUSLY_DELETED"]
    assert [(w["id"], w["run_id"]) for w in warned] == [("n-1", runs["n-1"])], res.stdout
    # again: nothing new, and the record is still one a receipted removal took out, so it is
    # named again (audit 49i: an unchanged line may be a killed run's, whose rerun must warn)
    res = runner.invoke(app, ["import", str(src)])
    assert res.exit_code == 0 and res.output.count("PREVIOUSLY_DELETED") == 1, res.output
    assert "record n-1" in res.output and runs["n-1"] in res.output, res.output
