"""Session 47 (audit 47n): mutations of memlife/dispute_export.py (session 47) the round-trip tests let
live. Each test is an adversary's erasures file (or export) against the real SQLite store
and review queue."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from typer.testing import CliRunner

from memlife.cli import app
from memlife.dispute_export import carry_disputes
from memlife.review_queue import ReviewQueue, item_id
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_guards_session35 import NS, T0, finding, rec
from tests.unit.test_roundtrip_session47 import _dispute, _held_erasure_exported, _ok


def test_a_dispute_line_of_a_record_not_imported_is_reported_not_found(home: Path) -> None:
    """The erasures file names a disputed record the records file did not carry (exported
    separately, or filtered). Must hold: the line is reported `not_found`, nothing is
    opened, and the lines after it are still carried (no crash on the missing record)."""
    with SqliteStore(home / "s.db") as s:
        s.put_many([rec("m-1")])
        lines = [_dispute(rec("m-9")), _dispute(s.get("m-1"))]
        out = carry_disputes(s, lines, now=T0 + timedelta(days=1))
        assert (out["not_found"], out["carried"]) == (["m-9"], [lines[1].item_id])
        assert ReviewQueue.for_store(s).get(lines[0].item_id) is None


def test_a_dispute_line_of_another_namespace_of_the_same_actor_disputes_nothing(
    home: Path,
) -> None:
    """The adversary edits a line's namespace to another of the same actor's (the id is
    the record's). Must hold: the scope is (actor, namespace), so the line is not found
    and the record stays undisputed."""
    with SqliteStore(home / "s.db") as s:
        s.put_many([rec("m-1")])
        line = _dispute(s.get("m-1"), namespace="/users/u-1/other")
        out = carry_disputes(s, [line], now=T0 + timedelta(days=1))
        assert (out["not_found"], out["carried"]) == (["m-1"], [])
        assert ReviewQueue.for_store(s).disputed("u-1", NS) == frozenset()


def test_an_item_open_but_unanswered_here_is_disputed_by_the_carried_line(home: Path) -> None:
    """The new store's own night opened the same item before the late import; nobody here
    answered it. Must hold: the carried dispute is applied to it (open is no answer), so
    the record is guarded as it was in the old store."""
    with SqliteStore(home / "s.db") as s:
        s.put_many([rec("m-1")])
        m1 = s.get("m-1")
        queue = ReviewQueue.for_store(s)
        queue.queue([finding(m1)], budget=10, run_id="run-n", at=T0)
        out = carry_disputes(s, [_dispute(m1)], now=T0 + timedelta(days=1))
        assert out["carried"] == [_dispute(m1).item_id]
        assert queue.disputed("u-1", NS) == {"m-1"}


def test_a_carried_dispute_keeps_the_lines_reason_time_and_text_hash(home: Path) -> None:
    """The item opened for a carried line is the old store's: its reason, when it was
    opened and the hash of the text it was about (what later nights compare). Must hold:
    each equals the line's, not the import's or a default."""
    with SqliteStore(home / "s.db") as s:
        s.put_many([rec("m-1")])
        m1 = s.get("m-1")
        line = _dispute(m1, reason="POSSIBLE_UPDATE", content_sha256="ab" * 32,
                        item_id=item_id("m-1", "POSSIBLE_UPDATE", "u-1", NS))  # fmt: skip
        carry_disputes(s, [line], now=T0 + timedelta(days=5))
        item = ReviewQueue.for_store(s).get(line.item_id)
        assert (item.reason, item.content_sha256) == ("POSSIBLE_UPDATE", "ab" * 32)
        assert item.opened_at == T0.isoformat()


def test_export_without_erasures_counts_a_standing_dispute_in_its_warning(
    home: Path, tmp_path: Path
) -> None:
    """A store whose only erasure-like state is one dispute is exported without
    `--erasures`. Must hold: the warning counts it (1), so the operator learns the
    imported store would delete the disputed record."""
    path = tmp_path / "s.db"
    with SqliteStore(path) as s:
        s.put_many([rec("m-1")])
        queue = ReviewQueue.for_store(s)
        queue.queue([finding(s.get("m-1"))], budget=10, run_id="run-n", at=T0)
        (item,) = queue.list()
        queue.close(item.item_id, state="disputed", decision="dispute",
                    reviewer="ana@example.com", at=T0, operation_id=None)  # fmt: skip
    res = CliRunner().invoke(
        app, ["export", "--store", f"sqlite:///{path}", "-o", str(tmp_path / "a.jsonl")]
    )
    assert res.exit_code == 0, res.output
    assert "1 erasures" in res.output


def test_importing_the_erasures_again_reports_the_record_already_pending(
    home: Path, tmp_path: Path
) -> None:
    """The operator runs the migration's import a second time. Must hold: the held record
    is not deferred again and the import says why (`already_pending` names it), rather
    than carrying nothing silently."""
    runner = CliRunner()
    records, erasures = _held_erasure_exported(runner, tmp_path)
    new = f"sqlite:///{tmp_path / 'new.db'}"
    args = ["import", str(records), "--store", new, "--erasures", str(erasures), "--json"]
    first = json.loads(_ok(runner, *args))["erasures"]
    again = json.loads(_ok(runner, *args))["erasures"]
    assert (first["carried"], first["already_pending"]) == (["m-h"], [])
    assert (again["carried"], again["already_pending"]) == ([], ["m-h"])
