"""Audit 49vi (session 49): an erased record brought back by an import of an old export.

The operator exports the store (a nightly backup), the record's text is then corrected
(`import --update`), and later the person asks for the record to be erased (`erase --id`).
The tombstone names the record's id and the hashes of its text *as it was at the
erasure*. Importing the old backup again (a restore, a re-sync from the system the export
came from) offered the same record (same actor, namespace, id and creation time) with its
earlier text: no tombstone hash matched it, and the erased record came back active,
recallable, with text the person asked to have erased. A record reusing an erased id is
a new record (created after the erasure); a line created before its id's erasure is the
erased record itself.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.erase import erase
from memlife.model import MemoryRecord, MemoryType, Status
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from memlife.tombstones import insert_new
from tests.fakes.agentcore import agentcore_store
from tests.support.cli import invoke

MARKER = "zqxoldexport49vi"
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


@pytest.fixture()
def erased_after_update(home: Path, tmp_path: Path) -> Path:
    """m-1 imported, backed up (the backup holds its first text, with the marker), its text
    corrected by `import --update`, then erased by id: the backup's path."""
    first, fixed, backup = tmp_path / "v1.jsonl", tmp_path / "v2.jsonl", tmp_path / "b.jsonl"
    first.write_text(
        line("m-1", f"Lives at 5 {MARKER} street.") + "\n" + line("m-2", "Has a dog named Rex.")
        + "\n"
    )  # fmt: skip
    fixed.write_text(line("m-1", "Lives at 7 Oak street now.") + "\n")
    assert invoke("import", str(first))[0] == 0
    assert invoke("export", "-o", str(backup))[0] == 0
    assert invoke("import", "--update", str(fixed))[0] == 0
    code, out, err = invoke("erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["erased"] == ["m-1"]
    assert files_holding(home, MARKER) == []  # the erasure itself left nothing
    return backup


def test_an_old_export_never_brings_an_erased_record_back(
    home: Path, erased_after_update: Path
) -> None:
    """The operator restores the backup taken before the record's last update: the erased
    record must not come back (refused as erased, reported), the kept one is there."""
    code, out, _ = invoke("import", str(erased_after_update), "--json")
    report = json.loads(out)
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("m-1") is None
        assert store.get("m-2") is not None
        memory = LongTermMemory(store)
        hits = memory.recall("u-1", "Where does the user live? street", k=5, threshold=-1.0)
        memory.close()
    assert "m-1" not in {h.record.id for h in hits}
    assert files_holding(home, MARKER) == []
    assert code == 1 and report["imported"] == 0
    assert [c["id"] for c in report["conflicts"]] == ["m-1"]


def test_an_old_export_is_refused_on_a_store_with_tombstones_at_home(home: Path) -> None:
    """The same on an AgentCore store (tombstones in $MEMLIFE_HOME/tombstones.db): the
    insert-only write refuses a record of the erased id created before the erasure."""
    old = MemoryRecord(
        id="m-1", actor_id="u-1", namespace=NS, memory_type=MemoryType.semantic,
        content=f"Lives at 5 {MARKER} street.", created_at=datetime(2026, 1, 2, tzinfo=UTC),
    )  # fmt: skip
    with agentcore_store() as (store, _fake):
        store.put_many([old.model_copy(update={"content": "Lives at 7 Oak street now."})])
        assert erase(store, "u-1", ids=["m-1"])["erased"] == ["m-1"]
        result = insert_new(store, [old])
        assert [f.code for f in result.failed] == ["ERASED_CONTENT"]
        assert store.get("m-1") is None


def test_a_new_record_may_take_an_erased_id(home: Path, erased_after_update: Path) -> None:
    """Control: a record created after the erasure under the erased id (another text) is a
    new record and is imported; the erased text itself stays refused whatever its date."""
    later = (datetime.now(UTC) + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    reused, again = erased_after_update.parent / "n.jsonl", erased_after_update.parent / "a.jsonl"
    reused.write_text(line("m-1", "Works as a nurse in Lyon.", later) + "\n")
    again.write_text(line("m-9", "Lives at 7 Oak street now.", later) + "\n")
    assert invoke("import", str(reused))[0] == 0
    code, out, _ = invoke("import", str(again), "--json")
    assert code == 1 and json.loads(out)["imported"] == 0  # the erased text: ERASED_CONTENT
    with SqliteStore(home / "memlife.db") as store:
        got = store.get("m-1")
        assert got is not None and got.status is Status.active
        assert got.content == "Works as a nurse in Lyon."
