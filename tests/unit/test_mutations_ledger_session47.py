"""Session 47 (audit 47b): the access ledger's per-actor erasure, where no test held it (session 46 "Left
alive": the CloudTrail ingest's late erase without its actor, the erase applier's per-actor
id filter) and the CloudTrail reader's actor resolver. Ids are reused across actors (each
store names its own; stores share one MEMLIFE_HOME ledger): an erasure of u1's record
must never take u2's reads of the same id. Real SQLite stores and the local ledger; the
only hook is the ledger's part writer, standing for an erasure committed meanwhile.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memlife.erase import erase, pending_erasures
from memlife.ledger import AccessLedger
from memlife.model import RetentionClass
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_cloudtrail_ingest_faults import DAY1, FACT, NS, _body, _get, _trail
from tests.unit.test_erase import NOW
from tests.unit.test_erase import rec as erec


def _rows(ledger: AccessLedger) -> set[tuple[str, str]]:
    table = ledger.read()
    actors, ids = table.column("actor_id").to_pylist(), table.column("record_id").to_pylist()
    return set(zip(actors, ids, strict=True))


# -- ledger_ingest.write_checked: the late erase is the erased record's actor's only -----------
def test_an_erasure_committed_during_the_ingest_leaves_another_actors_reads_of_the_id(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trail holds reads of one record id by u1 and by u2 (their requests name no
    actor: each is read from the record's namespace). The adversary erases u1's record
    while the ingest writes its part (after its check). The ingest scrubs u1's read of the
    id; u2's read of its own record of that id stays. (Kills ``ledger.erase(ids)`` for
    ``ledger.erase(ids, actor_id=actor)`` in ledger_ingest.write_checked.)"""
    store = SqliteStore(home / "memlife.db")
    with LongTermMemory(store, ledger=AccessLedger(home / "unused", flush_seconds=None)) as mem:
        rid = mem.remember("u1", NS, "health", FACT).record_id
    trail = _trail(tmp_path, _body(_get(rid, f"{DAY1}T10:00:00Z"),
                                   _get(rid, f"{DAY1}T10:01:00Z", actor="u2"),
                                   _get("m-other", f"{DAY1}T10:02:00Z")))  # fmt: skip
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    real = ledger._write_file

    def erasure_first(folder: Path, table: Any, *rest: Any) -> Path:
        if not store.tombstones("u1"):
            erase(store, "u1", ids=[rid])
        return real(folder, table, *rest)

    monkeypatch.setattr(ledger, "_write_file", erasure_first)
    ledger.ingest_cloudtrail(trail, store=store)
    assert _rows(ledger) == {("u2", rid), ("u1", "m-other")}
    store.close()


# -- cloudtrail.read_hits: the resolver only for a read that names no actor ----------------
def test_the_resolver_does_not_override_the_actor_a_read_names() -> None:
    """A read whose namespace names u1, ingested with a resolver (for the reads that name no
    actor) that answers another actor. The read is u1's: the resolver is asked only when
    neither the request nor the namespace names one. (Kills dropping ``not actor and`` in
    ``if not actor and actor_resolver is not None`` in cloudtrail.read_hits.)"""
    from memlife.cloudtrail import read_hits

    rows, why = read_hits(_get("m-1", f"{DAY1}T10:00:00Z"), lambda e: "from-resolver")
    assert (why, [r.actor_id for r in rows]) == (None, ["u1"])


# -- apply/appliers/erase._forget_derived: each actor's own ids ---------------------------
def test_a_drain_of_two_actors_erasures_leaves_each_ones_reads_of_the_others_id(
    home: Path,
) -> None:
    """u-1's m-a and u-2's m-b were under legal hold when their erasures were asked
    (deferred); both holds are lifted by a re-import, and one ``erase`` with no actor drains
    both in one batch. The home's ledger also holds u-2's reads of an m-a and u-1's of an
    m-b (records of those ids in another store of the home). Only (u-1, m-a) and (u-2, m-b)
    go. (Kills dropping ``if a == actor`` from the per-actor ids in the erase applier's
    _forget_derived: each actor's erase then names both ids.)"""
    store = SqliteStore(home / "memlife.db")
    held = RetentionClass.legal_hold
    a, b = erec("m-a", "Lives in Oslo.", retention=held), erec("m-b", "Owns a cat.", actor="u-2")
    b = b.model_copy(update={"retention_class": held})
    store.put_many([a, b])
    ledger = AccessLedger(home / "ledger")
    for actor in ("u-1", "u-2"):
        for rid in ("m-a", "m-b"):
            ledger.append(actor, f"/users/{actor}/facts", rid, rank=1,
                          at=datetime(2026, 5, 1, tzinfo=UTC))  # fmt: skip
    ledger.flush()
    assert erase(store, "u-1", ids=["m-a"], now=NOW)["deferred"] == ["m-a"]
    assert erase(store, "u-2", ids=["m-b"], now=NOW)["deferred"] == ["m-b"]
    free = RetentionClass.standard
    store.put_many([r.model_copy(update={"retention_class": free}) for r in (a, b)])
    out = erase(store, None, now=NOW)
    assert sorted(out["erased"]) == ["m-a", "m-b"] and pending_erasures(store) == []
    assert _rows(AccessLedger(home / "ledger")) == {("u-2", "m-a"), ("u-1", "m-b")}
    store.close()
