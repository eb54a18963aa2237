"""Audit 53a (session 53): an erasure that rebuilds a replacement leaves no erased word in
the replacement's inferred subject key.

A replacement a night wrote verbatim from its newest source (the extractive consolidator)
and saved without a subject gets an inferred subject key on the following night, made of
its own first content words (``group.infer_subjects``: "first content words ~tag"), which
are the source's words. Erasing that source rebuilds the replacement from the kept
sources (``erase._rebuild_now``: same id, the kept text). The erased record's own key goes
(``InferredSubjects.forget_removed``), but the rebuilt replacement's key was never touched:
the erased words stayed in the store's ``inferred_subjects`` table, and keys never move, so
no later night replaced them (invariant 11).

Real components: the SQLite store, the inferred-subject table, the local pipeline (the
extractive consolidator), the erasure.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.erase import erase
from memlife.group import subject_keywords
from memlife.inferred import InferredSubjects
from memlife.model import MemoryRecord, Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 11, 20, 2, tzinfo=UTC)
NS = "/users/u1/notes"  # not enforced: a night merges without an evaluation set
MARKER = "qzorblaxites"  # the erased record's word; the kept one says "qzorblaxite"
ERASED = f"Keeps the {MARKER} in the blue bag."
KEPT = "Keeps the qzorblaxite in the blue bag."


def rec(rid: str, content: str, day: int, **kw: Any) -> MemoryRecord:
    t = datetime(2026, 10, 1, 10, tzinfo=UTC) + timedelta(days=day)
    base = dict(id=rid, actor_id="u1", namespace=NS, memory_type="semantic", content=content,
                created_at=t, last_verified_at=t)  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


@pytest.fixture
def store(offline_home: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(offline_home / "memlife.db")
    yield s
    s.close()


def _keys(store: SqliteStore) -> dict[str, str]:
    rows = store.connection.execute("SELECT record_id, subject FROM inferred_subjects")
    return dict(rows.fetchall())


def _merged(store: SqliteStore) -> str:
    """k and e merged into r (e's text verbatim); r's inferred key made of its own words."""
    r = rec("r", ERASED, 5)
    r = r.model_copy(
        update={"provenance": r.provenance.model_copy(update={"supersedes": ["e", "k"]})}
    )
    sources = [
        s.model_copy(
            update={
                "status": Status.superseded,
                "provenance": s.provenance.model_copy(update={"replaced_by": "r"}),
            }
        )  # fmt: skip
        for s in (rec("k", KEPT, 0), rec("e", ERASED, 4))
    ]
    store.put_many([*sources, r])
    table = InferredSubjects.for_store(store)
    table.put("u1", NS, {"k": f"{subject_keywords(KEPT)} ~0a1b2c"}, "nightly")
    table.put("u1", NS, {"e": f"{subject_keywords(KEPT)} ~0a1b2c"}, "nightly")
    key = f"{subject_keywords(ERASED)} ~3d4e5f"  # as the night after the merge gives r
    table.put("u1", NS, {"r": key}, "nightly")
    return key


def test_a_rebuilt_replacement_keeps_no_inferred_key_of_the_erased_words(
    store: SqliteStore,
) -> None:
    key = _merged(store)
    assert MARKER in key
    out = erase(store, "u1", ids=["e"], now=NOW)
    assert out["status"] == "success" and out["rebuilt"] == ["r"]
    assert store.get("r").content == KEPT  # type: ignore[union-attr]
    assert not [k for k in _keys(store).values() if MARKER in k]
    # erase compacts the file: no byte of the erased word is left in it
    assert (
        MARKER.encode()
        not in (Path(store.connection.execute("PRAGMA database_list").fetchone()[2])).read_bytes()
    )


def test_control_an_erased_records_own_key_goes(store: SqliteStore) -> None:
    _merged(store)
    erase(store, "u1", ids=["e"], now=NOW)
    assert "e" not in _keys(store)
    assert _keys(store)["k"].startswith(subject_keywords(KEPT))  # the kept one stays


def test_the_erased_words_are_gone_from_the_store_after_the_next_night(
    offline_home: Path,
) -> None:
    """The same through real nights: merge, key the replacement, erase, a night more."""
    s = SqliteStore(offline_home / "memlife.db")
    s.put_many([rec("k", KEPT, 0), rec("e", ERASED, 4), rec("x", "Likes green tea.", 1)])
    s.close()
    run_local(RunConfig(dry_run=False, now=NOW))  # merges k and e: r holds e's text
    run_local(RunConfig(dry_run=False, now=NOW + timedelta(hours=10)))  # keys r by its words
    s = SqliteStore(offline_home / "memlife.db")
    try:
        (rid,) = [r.id for r in s.iter_all() if r.status is Status.active and r.id != "x"]
        assert MARKER in _keys(s)[rid]  # the night keyed the replacement by e's words
        out = erase(s, "u1", ids=["e"], now=NOW + timedelta(hours=12))
        assert out["rebuilt"] == [rid]
    finally:
        s.close()
    run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=1)))
    s = SqliteStore(offline_home / "memlife.db")
    try:
        assert s.get(rid).content == KEPT  # type: ignore[union-attr]
        assert not [k for k in _keys(s).values() if MARKER in k]
    finally:
        s.close()
    files = [p for p in offline_home.rglob("*") if p.is_file()]
    assert [p.name for p in files if MARKER.encode() in p.read_bytes()] == []
