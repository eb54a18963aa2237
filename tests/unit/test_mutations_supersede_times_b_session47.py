"""Session 47 (audit 47n): mutations of the supersede-time readers (session 47's "planned after the
id's latest removal in its scope": ``read_supersede_times`` and ``supersede_times_via``)
that no test killed. Both readers over a real SQLite journal must agree."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from memlife.journal import Operation, OpKind, OpState, Outcome, SqliteJournal
from memlife.journal import supersede_times_via as via_for_record
from memlife.journal.sqlite import read_supersede_times
from memlife.model import utcnow

DAY = timedelta(days=1)


def _op(oid: str, rid: str, kind: OpKind = OpKind.supersede, actor: str = "u",
        ns: str = "/users/u/facts") -> Operation:  # fmt: skip
    return Operation(operation_id=oid, run_id="run-1", kind=kind, actor_id=actor, namespace=ns,
                     record_id=rid, reasons=[], policy_version="p",
                     replacement_id="r-new")  # fmt: skip


def _readers(j: SqliteJournal, ids: list[str]) -> list[dict]:
    """Both readers, each given the records' scope as the night gives it."""
    scopes = {rid: ("u", "/users/u/facts") for rid in ids}
    return [read_supersede_times(j.connection, j.lock, ids, scopes),
            via_for_record(j, ids, scopes)]  # fmt: skip


def test_only_a_done_removal_of_the_ids_own_scope_voids_its_earlier_supersede(
    tmp_path: Path,
) -> None:
    """Each record is superseded (planned now), then the journal holds a removal of the same
    id journaled later: for ``a`` by another actor, for ``b`` in another namespace of the
    same actor, for ``c`` an erasure deferred by a hold (FAILED, never removed). Must hold:
    none of them voids the supersede (another scope's record; nothing removed)."""
    j = SqliteJournal.at(tmp_path / "journal.db")
    now = utcnow()
    j.plan([_op("s-a", "a"), _op("s-b", "b"), _op("s-c", "c"),
            _op("g-a", "a", OpKind.delete, actor="u2"),
            _op("g-b", "b", OpKind.erase, ns="/users/u/other"),
            _op("g-c", "c", OpKind.erase)])  # fmt: skip
    for oid in ("s-a", "s-b", "s-c"):
        j.transition(oid, OpState.APPLIED, outcome=Outcome.superseded, at=now)
    for oid in ("g-a", "g-b"):
        j.transition(oid, OpState.APPLIED, outcome=Outcome.deleted, at=now + DAY)
    j.transition("g-c", OpState.FAILED, outcome=Outcome.failed, error="LEGAL_HOLD", at=now + DAY)
    for got in _readers(j, ["a", "b", "c"]):
        assert got == {"a": now, "b": now, "c": now}


def test_a_purge_or_the_latest_of_several_removals_voids_an_earlier_supersede(
    tmp_path: Path,
) -> None:
    """``d``'s supersede is followed by a purge of the id; ``e`` was deleted long before its
    supersede was planned and deleted again after it; ``f``'s supersede waited in the retry
    queue and moved after the id's erasure. Must hold: none of them has a supersede time
    (each was of the record removed since, the id's latest removal counts)."""
    j = SqliteJournal.at(tmp_path / "journal.db")
    now = utcnow()
    j.plan([_op("s-d", "d"), _op("s-e", "e"), _op("s-f", "f"), _op("g-d", "d", OpKind.purge),
            _op("g-e1", "e", OpKind.delete), _op("g-e2", "e", OpKind.delete),
            _op("g-f", "f", OpKind.erase)])  # fmt: skip
    for oid in ("s-d", "s-e"):
        j.transition(oid, OpState.APPLIED, outcome=Outcome.superseded, at=now)
    j.transition("g-e1", OpState.APPLIED, outcome=Outcome.deleted, at=now - 30 * DAY)
    for oid in ("g-d", "g-e2", "g-f"):
        j.transition(oid, OpState.APPLIED, outcome=Outcome.deleted, at=now + DAY)
    j.transition("s-f", OpState.APPLIED, outcome=Outcome.superseded, at=now + 2 * DAY)
    for got in _readers(j, ["d", "e", "f"]):
        assert got == {}
