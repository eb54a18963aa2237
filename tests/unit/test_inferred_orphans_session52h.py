"""Audit 52h (session 52): inferred subjects and orphans as side states.

1. An erase killed right after its delete (before its clean-ups) is finished by the rerun,
   which no longer has the erased record's text. The inferred subject key made of that
   text's words (``group.infer_subjects``: "first content words ~tag") stayed on every other
   record grouped under it: the erased words lived on in the subject table (invariant 11).
2. A superseded record whose ``replaced_by`` names another actor's record (an import's
   REPLACEMENT_OUT_OF_SCOPE line, or an id reused after the replacement went) was never found
   by the night's orphan net: only a replacement that does not exist at all counted as gone.
   The record stayed superseded by a record its actor's recall can never serve, unreported.

Real components: the SQLite store, the inferred-subject table, the journal, the file sink, the
fault points, the local pipeline.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife import faults
from memlife.erase import erase
from memlife.group import subject_keywords
from memlife.inferred import InferredSubjects
from memlife.model import MemoryRecord, Status
from memlife.orphans import sources_follow
from memlife.pipeline import RunConfig, run_local
from memlife.plan import DELETE_ACTIONS, Action, Planner, Reason
from memlife.policy import load_policy
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import NOW as GATE_NOW
from tests.support.gate import rec as gate_rec
from tests.support.lifecycle import operation_receipts

NOW = datetime(2026, 6, 1, tzinfo=UTC)
NS = "/users/u-1/facts"
MARIA = "Maria adopted a grey kitten named Luna."
LUNA = "Luna the kitten sleeps on the sofa."


def rec(rid: str, content: str, **kw: Any) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic", content=content,
                owner="team-a", created_at=NOW - timedelta(days=50))  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


@pytest.fixture
def store(home: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(home / "memlife.db")
    yield s
    s.close()


def _grouped(store: SqliteStore) -> str:
    """x (MARIA) made the key; y was grouped under it since (as a night or remember does)."""
    store.put_many([rec("x", MARIA), rec("y", LUNA, created_at=NOW - timedelta(days=40))])
    key = f"{subject_keywords(MARIA)} ~0a1b2c"
    InferredSubjects.for_store(store).put("u-1", NS, {"x": key, "y": key}, "nightly")
    return key


# -- 1. an erase resumed after a crash past its delete ---------------------------------------
def test_control_an_erase_takes_its_words_off_the_records_grouped_under_its_key(
    store: SqliteStore,
) -> None:
    key = _grouped(store)
    assert "maria" in key  # the key holds x's words
    out = erase(store, "u-1", ids=["x"], now=NOW)
    assert out["status"] == "success"
    assert InferredSubjects.for_store(store).get(("u-1", NS), ["x", "y"]) == {}


def test_an_erase_resumed_after_a_crash_past_its_delete_takes_its_words_off_the_others(
    store: SqliteStore,
) -> None:
    _grouped(store)
    with faults.inject("after_delete"), pytest.raises(faults.InjectedFault):
        erase(store, "u-1", ids=["x"], now=NOW)
    assert store.get("x") is None  # deleted; no clean-up ran

    out = erase(store, "u-1", ids=["x"], now=NOW)  # the rerun finishes the clean-ups

    assert out["status"] == "success"
    # y's key is made of the erased text's words: it must go as it does without the crash
    assert InferredSubjects.for_store(store).get(("u-1", NS), ["x", "y"]) == {}


# -- 2. a superseded record pointing to another tenant's record ------------------------------
def _pointing(by: str, actor: str = "u-1", rid: str = "A") -> MemoryRecord:
    a = gate_rec(rid, "facts", "Lives in Lisbon.", subject="city", age=50, actor=actor)
    return a.model_copy(update={
        "status": Status.superseded, "status_changed_at": GATE_NOW - timedelta(days=2),
        "provenance": a.provenance.model_copy(update={"replaced_by": by}),
    })  # fmt: skip


def _planned(store: SqliteStore, *ids: str) -> dict[str, Any]:
    views = [r for r in (store.get(i) for i in ids) if r is not None]
    from memlife.model import plan_view

    pv = [plan_view(r) for r in views]
    decisions = Planner(load_policy(), GATE_NOW).plan_shard([pv], None)
    return {d.id: d for d in sources_follow(store, pv, decisions)}


def test_control_a_superseded_record_whose_replacement_is_its_own_stays(
    store: SqliteStore,
) -> None:
    b = gate_rec("B", "facts", "Lives in Porto.", subject="city", age=10)
    store.put_many([_pointing("B"), b])
    by = _planned(store, "A", "B")
    assert by["A"].action not in DELETE_ACTIONS


def test_a_superseded_record_pointing_to_another_actors_record_is_an_orphan(
    store: SqliteStore,
) -> None:
    other = gate_rec("B", "facts", "Works as a nurse.", subject="job", age=10, actor="u-2")
    store.put_many([_pointing("B"), other])
    by = _planned(store, "A")
    assert by["A"].action is Action.delete_expired
    assert Reason.REPLACEMENT_DELETED in by["A"].reasons


def test_the_night_finds_and_receipts_a_record_superseded_by_another_actors_id(
    home: Path,
) -> None:
    """The night as an operator runs it: a dangling link (Z is nowhere) was already found;
    a link to u-2's record B (what u-1's recall never serves) must be found the same way,
    with its own receipted delete; u-2's record is not touched."""
    other = gate_rec("B", "facts", "Works as a nurse.", subject="job", age=10, actor="u-2")
    with SqliteStore(home / "memlife.db") as s:
        s.put_many([_pointing("B"), _pointing("Z", rid="C"), other])
    run_local(RunConfig(dry_run=False, now=GATE_NOW))
    with SqliteStore(home / "memlife.db") as s:
        assert s.get("C") is None  # the dangling one: found before this audit
        assert s.get("B") is not None and s.get("B").status is Status.active  # type: ignore[union-attr]
        assert s.get("A") is None
    receipts = [r for r in operation_receipts(home / "receipts").values() if r["record_id"] == "A"]
    assert [r["outcome"] for r in receipts] == ["deleted"], receipts
    assert "REPLACEMENT_DELETED" in str(receipts[0]), receipts[0]
