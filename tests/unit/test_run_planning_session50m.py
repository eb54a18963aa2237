"""Audit 50m (session 50): mutation pass over audit 50k's ``_stands_for``.

The session's LoCoMo nights merge a record once (one replacement): its tests let live the
mutants that follow one step of a chain only, that follow a replacement into another
namespace, or through a replacement holding other words. Each test below kills one, on the
real SQLite store (the records as a night leaves them: ``replaced_by`` set).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memlife.model import content_sha256
from memlife.run_planning import _stands_for
from memlife.run_types import Shard
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_erase import rec

SHARD = Shard("u-1", "/users/u-1/facts")
TEXT = "Sam had a check-up with his doctor."


def _store(tmp_path: Path, *records: Any) -> tuple[SqliteStore, dict[str, Any]]:
    store = SqliteStore(tmp_path / "memlife.db")
    store.put_many(list(records))
    by_id = {r.id: SimpleNamespace(content_sha256=content_sha256(r.content)) for r in records}
    return store, by_id


def test_a_chain_of_restatements_stands_for_the_answered_record(tmp_path: Path) -> None:
    """B merged night after night (B -> R1 -> R2, each B's very words): R2 is what the
    person answered. Kills the mutant that follows one step only (``range(1)``)."""
    store, by_id = _store(
        tmp_path,
        rec("b", TEXT, replaced_by="r1"),
        rec("r1", TEXT, replaced_by="r2"),
        rec("r2", TEXT),
    )
    assert _stands_for(store, SHARD, by_id, "b", "r1")
    assert _stands_for(store, SHARD, by_id, "b", "r2")


def test_a_replacement_with_other_words_is_a_new_question(tmp_path: Path) -> None:
    """Kills the mutant that dropped the words check along the chain."""
    store, by_id = _store(
        tmp_path,
        rec("b", TEXT, replaced_by="r1"),
        rec("r1", TEXT + " He is fine.", replaced_by="r2"),
        rec("r2", TEXT),
    )
    assert not _stands_for(store, SHARD, by_id, "b", "r1")
    assert not _stands_for(store, SHARD, by_id, "b", "r2")


@pytest.mark.parametrize("other", ["actor", "namespace"])
def test_a_record_of_another_shard_stands_for_nothing_here(tmp_path: Path, other: str) -> None:
    """The answered pair's record is another shard's (its id reused there). Kills the
    mutant that dropped the shard check."""
    elsewhere = rec("b", TEXT, replaced_by="r1", actor="u-2") if other == "actor" else (
        rec("b", TEXT, replaced_by="r1", ns="other"))  # fmt: skip
    store, by_id = _store(tmp_path, elsewhere, rec("r1", TEXT))
    assert not _stands_for(store, SHARD, by_id, "b", "r1")


def test_control_one_merge_stands_for_the_record(tmp_path: Path) -> None:
    store, by_id = _store(tmp_path, rec("b", TEXT, replaced_by="r1"), rec("r1", TEXT))
    assert _stands_for(store, SHARD, by_id, "b", "r1")
    assert not _stands_for(store, SHARD, by_id, "r1", "b")
