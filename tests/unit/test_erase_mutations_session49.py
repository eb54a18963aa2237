"""Audit 49m2 (session 49 mutation pass, part 2): audit 49vi's "the erased record itself"
check (``stores/sqlite.py::_ERASED_BEFORE``, ``state/side.py::_erased_before``) on an id the
actor reused and had erased again.

An id erased, then taken again by the same actor (a new record, created after that
erasure: allowed), exported, corrected and erased in its turn: the second tombstone is
named ``erased_again(id, sha)`` (the tombstone table's key is the actor and the id). The
check read only the tombstone named by the id itself, the FIRST erasure's, older than the
second record: restoring the export brought the second erased record back, with the text
the person asked to have erased. Real components: the SQLite store, and the DynamoDB
state (moto, in process) as a store without a SQLite file of its own uses it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife import tombstones
from memlife.model import MemoryRecord, utcnow
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_guards_session37d import _RemoteStore, aws  # noqa: F401 (fixture)


def rec(rid: str, content: str, created: datetime) -> MemoryRecord:
    return MemoryRecord.model_validate({
        "id": rid, "actor_id": "u-1", "namespace": "/users/u-1/facts",
        "memory_type": "semantic", "content": content, "created_at": created,
    })  # fmt: skip


def erased_twice(store: Any) -> MemoryRecord:
    """m-1 erased; m-1 taken again (created after), exported, corrected, erased again: the
    export's line."""
    tombstones.add(store, [rec("m-1", "Plays chess on Sundays.", utcnow() - timedelta(days=30))])
    backup = rec("m-1", "Lives at 5 Elm street.", utcnow())  # after the first erasure
    assert tombstones.refusal(store, backup) is None  # a new record may take the id
    tombstones.add(store, [backup.model_copy(update={"content": "Lives at 7 Oak street."})])
    return backup


@pytest.fixture(params=["sqlite", "dynamodb"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        with SqliteStore(tmp_path / "m.db") as store:
            yield store
    else:
        request.getfixturevalue("aws")
        yield _RemoteStore()


def test_an_old_export_of_an_erased_record_is_refused(backend: Any) -> None:
    """Audit 49vi's case on both backends (the DynamoDB check had no test of its own): the
    record erased once, its export from before its last update (another text) refused."""
    created = utcnow() - timedelta(days=3)
    tombstones.add(backend, [rec("m-1", "Lives at 7 Oak street.", created)])
    assert tombstones.refusal(backend, rec("m-1", "Lives at 5 Elm street.", created)) == (
        "ERASED_CONTENT"
    )


def test_an_old_export_of_a_reused_id_erased_again_stays_erased(backend: Any) -> None:
    backup = erased_twice(backend)
    assert tombstones.refusal(backend, backup) == "ERASED_CONTENT"


def test_control_a_record_taking_the_id_after_both_erasures_is_new(backend: Any) -> None:
    erased_twice(backend)
    later = rec("m-1", "Works as a nurse in Lyon.", utcnow() + timedelta(seconds=1))
    assert tombstones.refusal(backend, later) is None


def test_control_another_ids_erasure_is_not_this_ids(backend: Any) -> None:
    """An id that merely begins with ``m-1#`` (ids may hold '#') is another record: its
    erasure does not make m-1, created before it, an erased record."""
    created = datetime(2026, 1, 2, tzinfo=UTC)
    tombstones.add(backend, [rec("m-1#note", "Plays chess on Sundays.", created)])
    tombstones.add(backend, [rec("m-1#0123456789abcdeg", "Keeps bees.", created)])
    assert tombstones.refusal(backend, rec("m-1", "Lives at 5 Elm street.", created)) is None
