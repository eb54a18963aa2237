"""Audit 49r1 (session 49's erasure fix, attacked): an id reused and erased a second time.

Audit 49vi refused an old export of an erased record by its id's tombstone written after
the record was created (`_ERASED_BEFORE`). An id the actor reused after an erasure and
had erased again keeps its second tombstone under `erased_again`'s name (`m-1#<sha>`),
which that rule never read: a backup of the reused record, taken before its last update,
brought the second erased record back, active and recallable.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.erase import erase
from memlife.model import MemoryRecord, MemoryType
from memlife.stores.sqlite import SqliteStore
from memlife.tombstones import insert_new
from tests.fakes.agentcore import agentcore_store
from tests.support.cli import invoke
from tests.unit.test_guards_session37d import aws  # noqa: F401 (fixture)

MARKER = "zqxreused49r1"
NS = "/users/u-1/facts"


def line(rid: str, content: str, created: str) -> str:
    return json.dumps({
        "id": rid, "actor_id": "u-1", "namespace": NS, "memory_type": "semantic",
        "subject": "address", "content": content, "owner": "team-a", "created_at": created,
    })  # fmt: skip


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def erase_m1() -> None:
    code, out, err = invoke("erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json")
    assert code == 0, err
    assert json.loads(out)["erased"] == ["m-1"]


def test_an_old_export_of_a_reused_and_erased_id_stays_erased(home: Path, tmp_path: Path) -> None:
    """m-1 erased; the id taken again by a new record (created after that erasure), backed
    up, corrected, erased again. Restoring the backup must not bring the second record's
    earlier text back."""
    first = tmp_path / "v1.jsonl"
    first.write_text(line("m-1", "Lives at 5 Elm street.", "2026-01-02T10:00:00Z") + "\n")
    assert invoke("import", str(first))[0] == 0
    erase_m1()
    reused, fixed, backup = tmp_path / "r.jsonl", tmp_path / "f.jsonl", tmp_path / "b.jsonl"
    created = stamp(datetime.now(UTC))  # after the first erasure: a new record takes the id
    reused.write_text(line("m-1", f"Works at the {MARKER} bakery.", created) + "\n")
    fixed.write_text(line("m-1", "Works at the town library now.", created) + "\n")
    assert invoke("import", str(reused))[0] == 0
    assert invoke("export", "-o", str(backup))[0] == 0
    assert invoke("import", "--update", str(fixed))[0] == 0
    erase_m1()  # its tombstone goes under erased_again's name: m-1 is taken by the first

    code, out, _ = invoke("import", str(backup), "--json")
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("m-1") is None
    assert code == 1 and json.loads(out)["imported"] == 0


def test_an_old_text_of_a_reused_and_erased_id_is_refused_on_agentcore(home: Path) -> None:
    """The same through the insert-only write of a store with its tombstones at home."""
    first = MemoryRecord(
        id="m-1", actor_id="u-1", namespace=NS, memory_type=MemoryType.semantic,
        content="Lives at 5 Elm street.", created_at=datetime(2026, 1, 2, tzinfo=UTC),
    )  # fmt: skip
    with agentcore_store() as (store, _fake):
        store.put_many([first])
        assert erase(store, "u-1", ids=["m-1"])["erased"] == ["m-1"]
        old = first.model_copy(
            update={"content": f"Works at the {MARKER} bakery.", "created_at": datetime.now(UTC)}
        )
        assert insert_new(store, [old]).failed == []  # a new record may take the erased id
        store.put_many([old.model_copy(update={"content": "Works at the town library now."})])
        assert erase(store, "u-1", ids=["m-1"])["erased"] == ["m-1"]
        result = insert_new(store, [old])
        assert [f.code for f in result.failed] == ["ERASED_CONTENT"]
        assert store.get("m-1") is None


def test_a_third_record_may_still_take_the_id(home: Path, tmp_path: Path) -> None:
    """Control: after both erasures, a record created later still takes the id."""
    first = tmp_path / "v1.jsonl"
    first.write_text(line("m-1", "Lives at 5 Elm street.", "2026-01-02T10:00:00Z") + "\n")
    assert invoke("import", str(first))[0] == 0
    erase_m1()
    second = tmp_path / "r.jsonl"
    second.write_text(line("m-1", "Works at the bakery.", stamp(datetime.now(UTC))) + "\n")
    assert invoke("import", str(second))[0] == 0
    erase_m1()
    third = tmp_path / "t.jsonl"
    later = stamp(datetime.now(UTC) + timedelta(minutes=1))
    third.write_text(line("m-1", "Plays the cello on Sundays.", later) + "\n")
    assert invoke("import", str(third))[0] == 0
    with SqliteStore(home / "memlife.db") as store:
        got = store.get("m-1")
        assert got is not None and got.content == "Plays the cello on Sundays."


@pytest.mark.usefixtures("aws")
def test_an_old_text_of_a_reused_and_erased_id_is_refused_on_dynamodb() -> None:
    """The same on DynamoDB state: the second tombstone is `id#m-1#<sha>`."""
    from memlife import tombstones
    from tests.unit.test_guards_session37d import _rec, _RemoteStore

    store: Any = _RemoteStore()
    first = _rec("m-1", "Lives at 5 Elm street.").model_copy(
        update={"created_at": datetime(2026, 1, 2, tzinfo=UTC)}
    )
    assert tombstones.add(store, [first]) == 1
    old = _rec("m-1", f"Works at the {MARKER} bakery.").model_copy(
        update={"created_at": datetime.now(UTC)}
    )
    assert tombstones.refusal(store, old) is None  # a new record may take the erased id
    assert tombstones.add(store, [old.model_copy(update={"content": "Works at the library."})])
    assert tombstones.refusal(store, old) == "ERASED_CONTENT"
    later = old.model_copy(update={"created_at": datetime.now(UTC) + timedelta(minutes=1)})
    assert tombstones.refusal(store, later) is None  # control: a third record still may
    lookalike = old.model_copy(update={"id": "m-10"})
    assert tombstones.refusal(store, lookalike) is None  # another id sharing the prefix
