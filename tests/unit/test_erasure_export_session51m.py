"""Audit 51m (session 51 mutation pass): the erasure time an erasures file carries (audit
51vi's ``erased_at``), as ``_refuse_live_text`` reads it on a migration.

Mutants the session's tests left alive, each a way an erased record came back:

- an id erased twice (the id reused after its first erasure, then erased again) has two
  tombstones, the second under ``m-1#<hex>``. The record the second erasure removed is
  the erased one if it was created before the *last* erasure. Keyed by the first
  (``min``) or by the tombstone's own name (``t.record_id``, not the id it stands for),
  a backup of that record under an older text, restored with the erasures into a new
  store, came back active, its text in the new store's file.
- an ``erased_at`` with no zone (a file edited or written by another tool; pydantic reads
  it naive) compared with a record's aware ``created_at``: a TypeError, not a migration.
- a record created at the very instant of the erasure is the erased one (``<=``, as the
  erasing store's ``erased_since`` reads ``erased_at >= created_at``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlife.erasure_export import parse_erasures
from memlife.model import content_sha256
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.unit.test_erasure_migration_session51vi import NS, files_holding, new_store

MARKER = "zqxtwice51m"


def line(rid: str, content: str, created: str | None = None) -> str:
    out = {"id": rid, "actor_id": "u-1", "namespace": NS, "memory_type": "semantic",
           "subject": "address", "content": content, "owner": "team-a"}  # fmt: skip
    if created is not None:
        out["created_at"] = created
    return json.dumps(out)


def test_a_reused_id_erased_twice_keeps_its_second_record_out_of_a_migration(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """m-1 (text A) is erased; the id is taken again by a new record (text B, created now),
    which is backed up, corrected to text C and erased too. Restoring the backup (B) with
    today's erasures into a new store must not bring B back: created before m-1's last
    erasure, it is the record that erasure removed."""
    first, reused, fixed = (tmp_path / n for n in ("a.jsonl", "b.jsonl", "c.jsonl"))
    backup, erasures = tmp_path / "backup.jsonl", tmp_path / "erasures.jsonl"
    first.write_text(line("m-1", "Lives at 5 Elm street.", "2026-01-02T10:00:00Z") + "\n")
    assert invoke("import", str(first))[0] == 0
    assert invoke("erase", "--actor", "u-1", "--id", "m-1", "--yes")[0] == 0
    now = datetime.now(UTC).isoformat()  # after the first erasure, before the second
    reused.write_text(line("m-1", f"Lives at 9 {MARKER} road.", now) + "\n")
    fixed.write_text(line("m-1", "Lives at 11 Oak road.", now) + "\n")
    code, out, err = invoke("import", str(reused), "--json")
    assert code == 0 and json.loads(out)["imported"] == 1, (out, err)
    assert invoke("export", "-o", str(backup))[0] == 0
    assert MARKER in backup.read_text()
    assert invoke("import", "--update", str(fixed))[0] == 0
    code, out, err = invoke("erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json")
    assert code == 0 and json.loads(out)["erased"] == ["m-1"], err
    assert invoke("export", "-o", str(tmp_path / "now.jsonl"), "--erasures", str(erasures))[0] == 0
    assert len([t for t in erasures.read_text().splitlines() if '"tombstone"' in t]) == 2
    home2 = new_store(tmp_path, monkeypatch)
    code, out, err = invoke("import", str(backup), "--erasures", str(erasures), "--json")
    assert code in (0, 1), err
    with SqliteStore(home2 / "memlife.db") as store:
        got = store.get("m-1")
    assert got is None, got.content if got else None
    assert files_holding(home2, MARKER) == []


def _restore(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, created: str, erased_at: str) -> Path:
    """A new store restored from a backup holding m-1 (created ``created``, text the file's
    tombstone does not hash: an older text) and an erasures file erasing m-1 at ``erased_at``."""
    backup, erasures = tmp_path / "backup.jsonl", tmp_path / "erasures.jsonl"
    backup.write_text(line("m-1", f"Lives at 5 {MARKER} street.", created) + "\n")
    tomb = {"kind": "tombstone", "actor_id": "u-1", "record_id": "m-1",
            "content_sha256": content_sha256("Lives at 7 Oak street now."), "norm_sha256": None,
            "erased_at": erased_at}  # fmt: skip
    erasures.write_text(json.dumps(tomb) + "\n")
    home2 = new_store(tmp_path, monkeypatch)
    code, out, err = invoke("import", str(backup), "--erasures", str(erasures), "--json")
    assert code in (0, 1), (out, err)
    return home2


def test_an_erasure_time_without_a_zone_is_read_as_utc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``erased_at`` written without a zone (a file edited by hand): read as UTC, as the
    stores read such times; m-1, created before it, is erased again, not a TypeError."""
    tombs, _ = parse_erasures([json.dumps({
        "kind": "tombstone", "actor_id": "u-1", "record_id": "m-1", "content_sha256": "a" * 64,
        "erased_at": "2026-02-01T00:00:00"})])  # fmt: skip
    assert tombs[0].erased_at is not None and tombs[0].erased_at.tzinfo is None
    home2 = _restore(tmp_path, monkeypatch, "2026-01-02T10:00:00Z", "2026-02-01T00:00:00")
    with SqliteStore(home2 / "memlife.db") as store:
        assert store.get("m-1") is None
    assert files_holding(home2, MARKER) == []


def test_a_record_created_at_the_erasure_instant_is_the_erased_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At or after its creation, as the erasing store's ``erased_since`` reads it."""
    home2 = _restore(tmp_path, monkeypatch, "2026-01-02T10:00:00Z", "2026-01-02T10:00:00Z")
    with SqliteStore(home2 / "memlife.db") as store:
        assert store.get("m-1") is None
    assert files_holding(home2, MARKER) == []


def test_control_a_record_created_after_the_erasure_is_carried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home2 = _restore(tmp_path, monkeypatch, "2026-01-02T10:00:01Z", "2026-01-02T10:00:00Z")
    with SqliteStore(home2 / "memlife.db") as store:
        got = store.get("m-1")
        assert got is not None and MARKER in got.content
