"""Audit 51vi (session 51): an erased record's older text carried into a new store.

README's migration is ``memlife import all.jsonl --erasures erasures.jsonl``; audit 44
made it take a backup restored with today's erasures ("an older backup restored with
today's erasures": the records first, then the tombstones, then each erased record the
backup held is erased again, with its receipt). Audit 49vi showed that a record updated
and then erased comes back from a backup taken before the update (same actor, namespace,
id and ``created_at``, its older text, which no tombstone hash names) and fixed it for
the store that did the erasure: a record is the erased one when a tombstone of its id was
written at or after its ``created_at``. The erasures file carries no such time, and
``_refuse_live_text`` re-erases only a record whose text a tombstone names: restoring
that backup with the erasures into a new store (a migration, a rebuilt host) kept the
erased record active and recallable, its older text in the new store's file.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.erasure_export import parse_erasures
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke

MARKER = "zqxmigrated51vi"
NS = "/users/u-1/facts"


def line(rid: str, content: str, created: str = "2026-01-02T10:00:00Z") -> str:
    return json.dumps({
        "id": rid, "actor_id": "u-1", "namespace": NS, "memory_type": "semantic",
        "subject": "address", "content": content, "owner": "team-a", "created_at": created,
    })  # fmt: skip


def files_holding(root: Path, needle: str) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*")
        if p.is_file() and needle.encode() in p.read_bytes()
    )  # fmt: skip


def new_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point MEMLIFE_HOME / MEMLIFE_STORE / MEMLIFE_RECEIPTS at a fresh home (the new host)."""
    home = tmp_path / "new-home"
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    monkeypatch.setenv("MEMLIFE_STORE", f"sqlite:///{home / 'memlife.db'}")
    monkeypatch.setenv("MEMLIFE_RECEIPTS", f"file://{home / 'receipts'}")
    return home


@pytest.fixture()
def backup_and_erasures(home: Path, tmp_path: Path) -> tuple[Path, Path]:
    """m-1 imported, backed up (its first text, with the marker), corrected by `import
    --update`, erased by id; then the erasures exported: (backup, erasures file)."""
    first, fixed = tmp_path / "v1.jsonl", tmp_path / "v2.jsonl"
    backup, erasures = tmp_path / "backup.jsonl", tmp_path / "erasures.jsonl"
    first.write_text(
        line("m-1", f"Lives at 5 {MARKER} street.") + "\n" + line("m-2", "Has a dog named Rex.")
        + "\n"
    )  # fmt: skip
    fixed.write_text(line("m-1", "Lives at 7 Oak street now.") + "\n")
    assert invoke("import", str(first))[0] == 0
    assert invoke("export", "-o", str(backup))[0] == 0
    assert invoke("import", "--update", str(fixed))[0] == 0
    code, out, err = invoke("erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json")
    assert code == 0 and json.loads(out)["erased"] == ["m-1"], err
    assert invoke("export", "-o", str(tmp_path / "now.jsonl"), "--erasures", str(erasures))[0] == 0
    assert files_holding(home, MARKER) == []  # the erasure itself left nothing
    return backup, erasures


def test_a_backup_restored_with_its_erasures_into_a_new_store_keeps_no_erased_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backup_and_erasures: tuple[Path, Path]
) -> None:
    """The operator rebuilds the store on a new host from last week's backup and today's
    erasures (README: "erased text stays refused"). m-1 was erased after its text was
    corrected; the backup holds its first text. It must not be active in the new store,
    recall must not return it, and its text must be in no file the import wrote."""
    backup, erasures = backup_and_erasures
    home = new_store(tmp_path, monkeypatch)
    code, out, err = invoke("import", str(backup), "--erasures", str(erasures), "--json")
    assert code in (0, 1), err
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("m-2") is not None
        got = store.get("m-1")
        memory = LongTermMemory(store)
        hits = memory.recall("u-1", "Where does the user live? street", k=5, threshold=-1.0)
        memory.close()
    assert got is None, got.content if got else None
    assert "m-1" not in {h.record.id for h in hits}
    assert files_holding(home, MARKER) == []


def test_a_record_that_took_the_id_after_the_erasure_is_migrated(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: a record created under the erased id after the erasure is a new record: a
    straight migration (this week's export and erasures) carries it, active."""
    first = tmp_path / "v1.jsonl"
    first.write_text(line("m-1", f"Lives at 5 {MARKER} street.") + "\n")
    assert invoke("import", str(first))[0] == 0
    assert invoke("erase", "--actor", "u-1", "--id", "m-1", "--yes")[0] == 0
    later = (datetime.now(UTC) + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    reused = tmp_path / "reused.jsonl"
    reused.write_text(line("m-1", "Works as a nurse in Lyon.", later) + "\n")
    assert invoke("import", str(reused))[0] == 0
    dump, erasures = tmp_path / "all.jsonl", tmp_path / "erasures.jsonl"
    assert invoke("export", "-o", str(dump), "--erasures", str(erasures))[0] == 0
    home2 = new_store(tmp_path, monkeypatch)
    code, _, err = invoke("import", str(dump), "--erasures", str(erasures))
    assert code == 0, err
    with SqliteStore(home2 / "memlife.db") as store:
        got = store.get("m-1")
        assert got is not None and got.content == "Works as a nurse in Lyon."
    assert files_holding(home2, MARKER) == []


def test_the_erasures_file_still_parses_without_erasure_times() -> None:
    """Control: an erasures file written before this audit (no ``erased_at``) is read."""
    old = json.dumps({"kind": "tombstone", "actor_id": "u-1", "record_id": "m-1",
                      "content_sha256": "a" * 64, "norm_sha256": None})  # fmt: skip
    tombs, rest = parse_erasures([old])
    assert [t.record_id for t in tombs] == ["m-1"] and rest == []
