"""Guards a mutation audit of the erasure path found unattacked (session 34, round c: the
compaction's VACUUM, the two tombstone commits around the final selection, the clean-ups of a
rebuilt replacement, the rebuild's choice of clean sources, the pending-erasure scope, the
hold release, the erase applier's hold check on a store without its own): each test holds one
guarantee that a named guard in memlife/ alone keeps, and fails when that guard is removed or
loosened. Real components: the SQLite store, the AgentCore store against its fake service,
the MiniLM embedder, the derived cache, the journal, the quarantine snapshots, the file sink."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import memlife.erase as erasure
from memlife import tombstones
from memlife.backends import embedding_cache
from memlife.derived import derived_for
from memlife.embed import default_embedder
from memlife.erase import EraseError, erase, pending_erasures, release_hold
from memlife.journal import Operation, OpKind, open_journal
from memlife.model import MemoryRecord, Provenance, RetentionClass, Status, content_sha256
from memlife.quarantine import restore, snapshot
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 6, 1, tzinfo=UTC)
NS = "/users/u-1/facts"
MARKER = "zqx-guard34c-canary-6d2f"  # unique: found nowhere once its record is erased


def rec(rid: str, content: str, age: float = 50, **kw: Any) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic", content=content,
                subject="city", owner="team-a", created_at=NOW - timedelta(days=age))  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


def disk_count(db: Path, needle: str) -> dict[str, int]:
    """Occurrences of ``needle`` in the database file and its WAL."""
    out = {}
    for suffix in ("", "-wal"):
        p = Path(f"{db}{suffix}")
        out[p.name] = p.read_bytes().count(needle.encode()) if p.exists() else 0
    return out


@pytest.fixture
def store(home: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(home / "memlife.db")
    yield s
    s.close()


def racing_select(
    monkeypatch: pytest.MonkeyPatch, at_call: int, action: Callable[[], None]
) -> None:
    """A concurrent writer (another connection) acts right after erase's ``at_call``-th
    selection: the boundary between a selection and the tombstone commit after it."""
    real = erasure._select
    calls: list[int] = []

    def select_then_act(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == at_call:
            action()
        return out

    monkeypatch.setattr(erasure, "_select", select_then_act)


# -- 1. erase.py compact(): VACUUM rebuilds the file, freed pages included ------------------
def test_erasure_leaves_no_byte_in_pages_freed_without_secure_delete(
    store: SqliteStore, home: Path
) -> None:
    """Attacks ``VACUUM`` in compact: a tool opening the store without secure_delete (the
    default of most SQLite builds) rewrote m-1's row and left its old cell, the text
    included, in free space. secure_delete zeroes only what memlife's own connection frees;
    the VACUUM is what leaves no byte of the erased text in the file."""
    db = home / "memlife.db"
    store.put_many([rec("m-1", f"Was treated for depression in 2025 ({MARKER}).", subject="health"),
                    rec("m-2", "Plays the cello.", subject="music")])  # fmt: skip
    con = sqlite3.connect(db)
    con.execute("PRAGMA secure_delete=OFF")
    con.execute("UPDATE records SET owner='team-health-and-care' WHERE id='m-1'")
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    assert disk_count(db, MARKER)["memlife.db"] == 2  # the row and its freed old cell

    out = erase(store, "u-1", subject="health", now=NOW)

    assert out["erased"] == ["m-1"]
    assert disk_count(db, MARKER) == {"memlife.db": 0, "memlife.db-wal": 0}


# -- 2. erase.py _erase: tombstones committed BEFORE the final selection --------------------
def test_a_replacement_written_after_the_final_selection_is_refused(
    store: SqliteStore, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks the first ``tombstones.add`` (before the second ``_select``): a concurrent
    nightly writes a replacement from the erased m-a right after the erasure's last
    selection. Only a tombstone already committed refuses it in the write's transaction;
    written later, the replacement (the erased claim in model words) would stay active."""
    store.put_many([rec("m-a", "Takes lithium every day.", subject="meds"),
                    rec("m-b", "Takes vitamin D daily.", subject="meds")])  # fmt: skip
    summary = rec("r-1", "Daily medication: lithium.", subject="meds", age=0,
                  provenance={"supersedes": ["m-a"]})  # fmt: skip
    refused: list[str] = []

    def nightly_writes() -> None:
        with SqliteStore(home / "memlife.db") as other:
            res = tombstones.write_replacement(other, summary)
            refused.extend(f.code for f in res.failed)

    racing_select(monkeypatch, 2, nightly_writes)
    out = erase(store, "u-1", ids=["m-a"], now=NOW)

    assert out["erased"] == ["m-a"]
    assert refused == [tombstones.ERASED_SOURCE]
    assert store.get("r-1") is None and store.get("m-b") is not None


# -- 3. erase.py _erase: what only the final selection found is tombstoned too --------------
def test_a_replacement_found_by_the_final_selection_is_tombstoned(
    store: SqliteStore, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks the second ``tombstones.add(store, free)``: a replacement written from m-a
    between the first selection and the first tombstones is found by the final selection and
    erased (DERIVED_REPLACEMENT). Its own text must be tombstoned as well: an import or a
    ``remember`` of that text (no provenance left) is refused, not brought back."""
    store.put_many([rec("m-a", "Takes lithium every day.", subject="meds"),
                    rec("m-b", "Takes vitamin D daily.", subject="meds")])  # fmt: skip
    summary = rec("r-1", "Daily medication: lithium.", subject="meds", age=0,
                  provenance={"supersedes": ["m-a"]})  # fmt: skip

    def nightly_writes() -> None:
        with SqliteStore(home / "memlife.db") as other:
            assert tombstones.write_replacement(other, summary).succeeded == ["r-1"]

    racing_select(monkeypatch, 1, nightly_writes)
    out = erase(store, "u-1", ids=["m-a"], now=NOW)

    assert out["erased"] == ["m-a", "r-1"] and out["derived"] == ["r-1"]
    again = summary.model_copy(update={"id": "m-9", "provenance": Provenance()})
    res = tombstones.insert_new(store, [again])
    assert res.succeeded == [] and [f.code for f in res.failed] == [tombstones.ERASED_CONTENT]


# -- 4. erase.py _rebuild_now: a rebuilt replacement's quarantine snapshot goes ---------------
def test_a_rebuilt_quarantined_replacement_is_never_restored_to_its_erased_source(
    store: SqliteStore,
) -> None:
    """Attacks ``forget_snapshots(store, ids)`` in _rebuild_now: r-1 (m-a's text verbatim)
    sat in quarantine when m-a was erased; it is rebuilt from m-b. Its snapshot still listed
    m-a as a source: a restore then would point the active r-1 at the erased record again."""
    erased = "The user lives in Berlin."
    store.put_many([
        rec("m-a", erased, status="superseded", provenance={"replaced_by": "r-1"}),
        rec("m-b", "The user lives in Berlin, Germany.", status="superseded",
            provenance={"replaced_by": "r-1"}),
        rec("r-1", erased, age=10, provenance={"supersedes": ["m-a", "m-b"]}),
    ])  # fmt: skip
    snapshot(store, ["r-1"])  # what the gate does with a blocked change: snapshot, quarantine
    store.set_status(["r-1"], Status.quarantined, at=NOW - timedelta(days=1))

    out = erase(store, "u-1", ids=["m-a"], now=NOW)
    assert out["erased"] == ["m-a"] and out["rebuilt"] == ["r-1"]
    assert restore(store, ["r-1"], now=NOW + timedelta(hours=1))["counts"]["restored"] == 1

    r_1 = store.get("r-1")
    assert r_1.status is Status.active and r_1.provenance.supersedes == ["m-b"]
    assert r_1.provenance.content_sha256 == content_sha256(r_1.content)


# -- 5-8. erase.py _rebuild_now / _erase: releasing a held tainted replacement ---------------
def released_rebuild(store: SqliteStore) -> dict[str, Any]:
    """r-1 (held) holds the erased m-a's text verbatim: the erasure defers it. While held,
    r-1 is recalled (its vector is cached again), the nightly keeps a derived row for its
    shard and a crashed write left its text in a journal payload. The release rebuilds r-1
    from m-b; what r-1's old text left must go with it."""
    erased = f"The user lives in Berlin ({MARKER})."
    store.put_many([
        rec("m-a", erased, status="superseded", provenance={"replaced_by": "r-1"}),
        rec("m-b", "The user lives in Berlin, Germany.", status="superseded",
            provenance={"replaced_by": "r-1"}),
        rec("r-1", erased, age=10, provenance={"supersedes": ["m-a", "m-b"]},
            retention_class="legal_hold"),
    ])  # fmt: skip
    first = erase(store, "u-1", ids=["m-a"], now=NOW)
    assert first["erased"] == ["m-a"] and first["deferred"] == ["r-1"]
    held = store.get("r-1")
    cache = embedding_cache(store, default_embedder())
    cache.get_or_embed([held])
    derived = derived_for(cache)
    assert derived is not None
    derived.put(("u-1", NS), "inference", "d-1", {"r-1": "berlin lives"})
    derived.flush()
    open_journal(store).plan([
        Operation(operation_id="op-crashed", run_id="run-x", kind=OpKind.write_replacement,
                  actor_id="u-1", namespace=NS, record_id="r-1", reasons=["CONSOLIDATION"],
                  policy_version="v", payload=held.to_json())
    ])  # fmt: skip
    q = "SELECT COUNT(*) FROM embeddings WHERE content_sha256=?"
    assert store.connection.execute(q, (content_sha256(erased),)).fetchone()[0] > 0

    out = release_hold(store, ["r-1"], now=NOW + timedelta(hours=1))

    [done] = out["erasures"]
    assert done["rebuilt"] == ["r-1"] and done["erased"] == []
    assert store.get("r-1").content == "The user lives in Berlin, Germany."
    return {"erased": erased}


def test_a_released_rebuild_drops_the_vector_of_the_old_text(store: SqliteStore) -> None:
    """Attacks ``plan.old_shas |= ...`` in plan_erasure and ``cache.delete_for(old_shas)``
    in _rebuild_now: no erase operation runs at the release (nothing is deleted), so only
    the rebuild drops the cached vector of the erased text r-1 held."""
    erased = released_rebuild(store)["erased"]
    q = "SELECT COUNT(*) FROM embeddings WHERE content_sha256=?"
    assert store.connection.execute(q, (content_sha256(erased),)).fetchone()[0] == 0


def test_a_released_rebuild_forgets_journal_payloads_of_the_old_text(store: SqliteStore) -> None:
    """Attacks ``run.journal.forget_payloads(ids)`` in _rebuild_now: a journal payload
    holding r-1's old text (the erased claim) is forgotten by the rebuild."""
    released_rebuild(store)
    op = open_journal(store).get("op-crashed")
    assert op is not None and op.payload is None


def test_a_released_rebuild_forgets_the_derived_rows_of_its_shard(store: SqliteStore) -> None:
    """Attacks ``forget_for(cache, ...)`` in _rebuild_now: the shard's derived rows (an
    inferred subject key holds content words) go when a replacement's text changes."""
    released_rebuild(store)
    rows = store.connection.execute("SELECT actor_id, namespace FROM derived").fetchall()
    assert rows == []


def test_a_release_that_only_rebuilds_still_compacts(store: SqliteStore, home: Path) -> None:
    """Attacks ``if free or plan.rebuild`` before compact in _erase: a release that erases
    nothing but rewrites r-1 leaves its old page in the WAL unless it compacts too (the
    store stays open: a long-lived process never folds it by closing)."""
    released_rebuild(store)
    assert disk_count(home / "memlife.db", MARKER) == {"memlife.db": 0, "memlife.db-wal": 0}


# -- 9. erase.py _rebuilt: a replacement is rebuilt from CLEAN kept sources only -------------
def chain(store: SqliteStore, outer_sources: list[str]) -> str:
    """m-a (erased) and m-b -> r-1 (m-a's text verbatim) -> r-2 (r-1's text verbatim)."""
    erased = "The user lives in Berlin."
    store.put_many([
        rec("m-a", erased, 40, status="superseded", provenance={"replaced_by": "r-1"}),
        rec("m-b", "The user lives in Berlin, Germany.", 50, status="superseded",
            provenance={"replaced_by": "r-1"}),
        rec("r-1", erased, 20, status="superseded",
            provenance={"supersedes": ["m-a", "m-b"], "replaced_by": "r-2"}),
        rec("r-2", erased, 5, provenance={"supersedes": outer_sources}),
    ])  # fmt: skip
    return erased


def test_a_rebuilt_replacement_never_takes_a_tainted_kept_sources_text(
    store: SqliteStore,
) -> None:
    """Attacks ``records=list(clean)`` in _rebuilt: r-2's kept sources are r-1 (itself
    holding the erased text, rebuilt in the same erasure) and m-c. Picking among all kept
    sources takes r-1, the newest: r-2 would be rebuilt to the very text erased."""
    erased = chain(store, ["r-1", "m-c"])
    store.put_many([rec("m-c", "The user lives in Paris.", 60, status="superseded",
                        provenance={"replaced_by": "r-2"})])  # fmt: skip

    out = erase(store, "u-1", ids=["m-a"], now=NOW)

    assert out["erased"] == ["m-a"] and out["rebuilt"] == ["r-1", "r-2"]
    assert all(r.content != erased for r in store.iter_all())
    assert store.get("r-2").content == "The user lives in Paris."


# -- 10. erase.py _rule: no clean source left -> withdrawn, never rebuilt from nothing -------
def test_a_replacement_whose_only_kept_source_is_tainted_is_withdrawn(
    store: SqliteStore,
) -> None:
    """Attacks ``not clean`` in _rule's ``if not clean or not verbatim``: r-2's only source
    r-1 holds the erased text. Rebuilding r-2 needs a clean source: there is none, so r-2 is
    withdrawn and r-1 (rebuilt from m-b) comes back active; the erasure completes."""
    erased = chain(store, ["r-1"])

    out = erase(store, "u-1", ids=["m-a"], now=NOW)

    assert out["status"] == "success" and out["erased"] == ["m-a", "r-2"]
    assert out["reactivated"] == ["r-1"] and out["derived"] == ["r-2"]
    r_1 = store.get("r-1")
    assert r_1.status is Status.active and r_1.content == "The user lives in Berlin, Germany."
    assert all(r.content != erased for r in store.iter_all())


# -- 11. erase.py _is_its_record: a pending erasure is its namespace's record only ----------
def test_a_pending_erasure_never_reaches_a_record_of_another_namespace_under_its_id(
    store: SqliteStore,
) -> None:
    """Attacks the namespace in _is_its_record: u-1's held X (debts) was deferred, then
    deleted by other means; u-1 later keeps a record X in another namespace (hobbies).
    `erase --pending` must leave that record alone and forget the stale row."""
    held = rec("X", "Owes 500 EUR to Bob.", subject="debt", retention_class="legal_hold")
    store.put_many([held])
    assert erase(store, "u-1", ids=["X"], now=NOW)["deferred"] == ["X"]
    store.put_many([held.model_copy(update={"retention_class": RetentionClass.standard})])
    assert store.delete_many(["X"]).succeeded == ["X"]  # gone by other means (an expiry)
    other = rec("X", "Plays the cello.", subject="music", namespace="/users/u-1/hobbies")
    store.put_many([other])

    out = erase(store, None, now=NOW + timedelta(hours=1))

    assert out["erased"] == [] and out["released"] == []
    assert store.get("X") == other and pending_erasures(store) == []


# -- 12. erase.py release_hold: a "release" to legal_hold is refused ---------------------------
def test_releasing_a_hold_to_legal_hold_is_refused(store: SqliteStore, home: Path) -> None:
    """Attacks the legal_hold check of release_hold: a release that keeps the hold would be
    receipted as ``released`` while nothing was released (invariant 2)."""
    store.put_many([rec("H", "Held fact.", retention_class="legal_hold")])
    with pytest.raises(EraseError, match="not a release"):
        release_hold(store, ["H"], retention_class=RetentionClass.legal_hold, now=NOW)
    assert [o for o in open_journal(store).for_record("H")] == []
    assert not (home / "receipts").exists() or not list((home / "receipts").rglob("*.json"))


# -- 13. apply/appliers/erase.py: a hold placed since selection wins on any store ------------
def test_a_hold_placed_after_selection_wins_on_a_store_whose_delete_ignores_holds(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``is_held(r)`` in the erase applier: SQLite's DELETE refuses a held row by
    itself, AgentCore's does not. A hold placed by a writer that takes no lease, after the
    erasure selected x, must still defer the erasure: x stays, a pending row remembers it."""
    from tests.fakes.agentcore import agentcore_store

    with agentcore_store() as (ac, _fake):
        ac.put_many([rec("x", "Was treated for depression in 2025.", subject="health")])
        real = erasure.manual_run

        def hold_first(*args: Any, **kwargs: Any) -> Any:
            held = ac.get("x").model_copy(update={"retention_class": RetentionClass.legal_hold})
            assert ac.put_many([held]).failed == []
            return real(*args, **kwargs)

        monkeypatch.setattr(erasure, "manual_run", hold_first)
        out = erase(ac, "u-1", ids=["x"], now=NOW)
        monkeypatch.setattr(erasure, "manual_run", real)

        assert out["erased"] == [] and out["deferred"] == ["x"]
        kept = ac.get("x")
        assert kept is not None and kept.retention_class is RetentionClass.legal_hold
        assert [p["record_id"] for p in pending_erasures(ac)] == ["x"]


# -- 14. apply/appliers/erase.py: the vectors of the text the record holds when deleted ------
def test_the_vector_of_text_rewritten_since_selection_goes_with_the_record(
    store: SqliteStore, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``shas[...] |= {r.sha256, content_sha256(r.content)}`` in the erase applier:
    x was selected holding T1; a writer that takes no lease rewrote it to T2 (and recall
    cached T2's vector) before the delete. The operation names T1's hash only: the applier
    reads the record as deleted, so T2's vector and token codes go too."""
    rewritten = "Was treated for depression in 2025 and again in 2026."
    store.put_many([rec("x", "Was treated for depression in 2025.", subject="health")])
    real = erasure.manual_run

    def rewrite_first(*args: Any, **kwargs: Any) -> Any:
        with SqliteStore(home / "memlife.db") as other:
            other.put_many([other.get("x").model_copy(update={"content": rewritten})])
            embedding_cache(other, default_embedder()).get_or_embed([other.get("x")])
        return real(*args, **kwargs)

    monkeypatch.setattr(erasure, "manual_run", rewrite_first)
    out = erase(store, "u-1", ids=["x"], now=NOW)
    monkeypatch.setattr(erasure, "manual_run", real)

    assert out["erased"] == ["x"] and store.get("x") is None
    q = "SELECT COUNT(*) FROM embeddings WHERE content_sha256=?"
    assert store.connection.execute(q, (content_sha256(rewritten),)).fetchone()[0] == 0


# -- 15. apply/appliers/erase.py: an erased quarantined record's snapshot goes ---------------
def test_erasing_a_quarantined_record_leaves_no_snapshot_of_it(store: SqliteStore) -> None:
    """Attacks ``side.forget_snapshots(gone)`` in the erase applier: a quarantine snapshot
    (the record's provenance: ids and hashes) is a row derived from the erased record."""
    from memlife.quarantine import snapshots

    store.put_many([rec("q", "Was treated for depression in 2025.", subject="health")])
    snapshot(store, ["q"])
    store.set_status(["q"], Status.quarantined, at=NOW - timedelta(days=1))
    assert set(snapshots(store, ["q"])) == {"q"}

    out = erase(store, "u-1", ids=["q"], now=NOW)

    assert out["erased"] == ["q"] and snapshots(store, ["q"]) == {}


# -- 16. apply/appliers/erase.py: a deferral applied at last is no open failure --------------
def test_a_deferred_erasure_applied_after_release_leaves_no_open_failure(
    store: SqliteStore,
) -> None:
    """Attacks ``journal.resolve(deferred, "ERASED_AFTER_RELEASE")`` in the erase applier:
    the deferral is a FAILED (LEGAL_HOLD) operation listed for an operator; once the record
    is erased after its release it is settled, not waiting for anyone."""
    store.put_many([rec("h", "Held fact.", subject="case-17", retention_class="legal_hold")])
    assert erase(store, "u-1", ids=["h"], now=NOW)["deferred"] == ["h"]
    journal = open_journal(store)
    assert [o.record_id for o in journal.terminal_failures()] == ["h"]

    out = release_hold(store, ["h"], now=NOW + timedelta(hours=1))

    assert [e["erased"] for e in out["erasures"]] == [["h"]]
    assert journal.terminal_failures() == []
    [deferral] = journal.terminal_failures(include_resolved=True)
    assert deferral.resolution == "ERASED_AFTER_RELEASE"


# -- 17. apply/appliers/erase.py: a resumed erase (record already gone) still cleans up ------
def test_an_erase_resumed_after_a_crash_past_the_delete_finishes_the_clean_ups(
    store: SqliteStore,
) -> None:
    """Attacks ``gone = [*res.succeeded, *res.missing]`` in the erase applier: the first
    attempt died right after the delete, before any clean-up. The rerun finds the record
    absent (its own delete); its vector and the journal payload holding its text still go."""
    from memlife import faults

    x = rec("x", f"Was treated for depression in 2025 ({MARKER}).", subject="health")
    store.put_many([x, rec("y", "Plays the cello.", subject="music")])
    embedding_cache(store, default_embedder()).get_or_embed([x])
    open_journal(store).plan([
        Operation(operation_id="op-crashed", run_id="run-x", kind=OpKind.write_replacement,
                  actor_id="u-1", namespace=NS, record_id="x", reasons=["CONSOLIDATION"],
                  policy_version="v", payload=x.to_json())
    ])  # fmt: skip
    with faults.inject("after_delete"), pytest.raises(faults.InjectedFault):
        erase(store, "u-1", ids=["x"], now=NOW)
    assert store.get("x") is None

    out = erase(store, "u-1", ids=["x"], now=NOW)

    # its own killed attempt deleted it: receipted deleted (session 38), not already_absent
    assert out["status"] == "success" and out["counts"]["deleted"] == 1
    q = "SELECT COUNT(*) FROM embeddings WHERE content_sha256=?"
    assert store.connection.execute(q, (content_sha256(x.content),)).fetchone()[0] == 0
    op = open_journal(store).get("op-crashed")
    assert op is not None and op.payload is None


# -- 17b. erase.py _erase: a resumed erase compacts (the bug this audit found) ---------------
def test_an_erase_resumed_in_the_same_process_leaves_no_byte_in_the_wal(
    store: SqliteStore, home: Path
) -> None:
    """The first attempt deleted the record and failed before compacting. The rerun of the
    same request (the same run: ``_resume_own`` finishes the delete, already absent) found
    nothing left to select and skipped compaction, so the erased text stayed in the WAL for
    as long as the process kept the store open (a library user's agent, a worker): the
    erase reported success with the bytes on disk. Now a rerun that finished an erasure
    compacts; so does ``erase --pending`` when it finishes one."""
    from memlife import faults

    db = home / "memlife.db"
    store.put_many([rec("x", f"Was treated for depression in 2025 ({MARKER}).", subject="health"),
                    rec("y", "Plays the cello.", subject="music")])  # fmt: skip
    with faults.inject("after_delete"), pytest.raises(faults.InjectedFault):
        erase(store, "u-1", ids=["x"], now=NOW)
    assert store.get("x") is None and sum(disk_count(db, MARKER).values()) > 0  # not compacted

    out = erase(store, "u-1", ids=["x"], now=NOW)

    # its own killed attempt deleted it: receipted deleted (session 38), not already_absent
    assert out["status"] == "success" and out["counts"]["deleted"] == 1
    assert (out.get("compaction") or {}).get("vacuumed") is True
    assert disk_count(db, MARKER) == {"memlife.db": 0, "memlife.db-wal": 0}  # store still open


# -- 18. erase_sweep.py: tombstones written shortly BEFORE the dry run began count too --------
def test_a_dry_run_begun_after_the_erasures_tombstones_drops_what_it_wrote_back(
    store: SqliteStore, home: Path
) -> None:
    """Attacks ``started - RECENT`` in sweep_after_write (and its ``delete_for``): the erasure
    committed its tombstones, then a dry run began and read x before the delete; it writes
    x's vector, a derived row and a model answer after the erasure dropped everything. The
    tombstone predates the run's start, yet the erasure was still under way: the sweep after
    the run's writes drops them all, and folds the WAL that held their words."""
    from memlife.consolidate.answers import answer_book
    from memlife.embed_cache import EmbeddingCache
    from memlife.erase_sweep import sweep_after_write
    from memlife.model import utcnow

    x = rec("x", f"Was treated for depression in 2025 ({MARKER}).", subject="health")
    store.put_many([x, rec("y", "Plays the cello.", subject="music")])
    assert erase(store, "u-1", ids=["x"], now=NOW)["erased"] == ["x"]
    started = utcnow() + timedelta(minutes=5)  # the dry run's start, after the tombstones
    cache = EmbeddingCache(default_embedder(), path=home / "embeddings.db")
    try:
        cache.get_or_embed([x])  # the dry run's writes, after the erasure's drop
        derived = derived_for(cache)
        assert derived is not None
        derived.put(("u-1", NS), "inference", "d-1", {"x": f"depression {MARKER}"})
        derived.flush()
        book = answer_book(cache, dry_run=True)
        assert book is not None
        book.keep("a" * 64, ("u-1", NS), "model", {"summary": f"Treated ({MARKER})."})

        assert sweep_after_write(store, cache, ["u-1"], started) > 0

        con = cache.connection
        q = "SELECT COUNT(*) FROM embeddings WHERE content_sha256=?"
        assert con.execute(q, (content_sha256(x.content),)).fetchone()[0] == 0
        assert con.execute("SELECT COUNT(*) FROM derived").fetchone()[0] == 0
        assert con.execute("SELECT COUNT(*) FROM model_answers").fetchone()[0] == 0
        left = disk_count(home / "embeddings.db", MARKER)
        assert left == {"embeddings.db": 0, "embeddings.db-wal": 0}
    finally:
        cache.close()


# -- 19. erase.py _close_reviews: an erased record's review items are closed, not left open ---
def test_the_review_items_of_an_erased_record_are_closed_by_its_erase(offline_home: Path) -> None:
    """Attacks _close_reviews: a night opened review items on u-7's records; erasing one
    leaves nothing to decide. Its items are resolved (decision ``erased``, by the erasure's
    run and the record's erase operation), not left waiting for a reviewer for ever."""
    from memlife.pipeline import RunConfig, run_local
    from memlife.review_queue import ReviewQueue

    day = datetime(2026, 1, 5, 8, tzinfo=UTC)
    with SqliteStore(offline_home / "memlife.db") as s:
        s.put_many([
            MemoryRecord.model_validate({
                "id": rid, "actor_id": "u-7", "namespace": "/team/notes",
                "memory_type": "semantic", "content": text, "created_at": day,
                "source": "agent_inferred", "confidence": 0.6,
            })
            for rid, text in (("bees", "The user keeps bees in the garden."),
                              ("standup", "The team standup is at 9:30."))
        ])  # fmt: skip
    run_local(RunConfig(dry_run=False, now=day + timedelta(days=2)))
    with SqliteStore(offline_home / "memlife.db") as s:
        queue = ReviewQueue.for_store(s)
        opened = [i for i in queue.list(states=("open", "disputed")) if i.record_id == "bees"]
        assert opened  # the setup holds: the night asked a reviewer about "bees"

        out = erase(s, "u-7", ids=["bees"], now=day + timedelta(days=3))

        assert out["erased"] == ["bees"] and out["counts"]["review_items_closed"] == len(opened)
        [op] = [o for o in open_journal(s).by_run(out["run_id"]) if o.record_id == "bees"]
        for item in opened:
            closed = queue.get(item.item_id)
            assert closed is not None and closed.state == "resolved"
            assert closed.decision == "erased" and closed.operation_id == op.operation_id
        assert any(i.record_id == "standup" for i in queue.list(states=("open", "disputed")))


# -- 20. holds.py place_hold: a hold on nothing is refused before any run ----------------------
def test_a_hold_naming_no_existing_record_is_refused_without_a_receipt(
    store: SqliteStore, home: Path
) -> None:
    """Attacks ``require_some`` in place_hold: a hold placed on ids no record has would write
    a run manifest and receipt a reviewer could cite as "held", while nothing is held."""
    from memlife.holds import HoldNotFound, place_hold

    store.put_many([rec("m-1", "Lives in Lisbon.")])
    with pytest.raises(HoldNotFound):
        place_hold(store, ids=["m-404", "m-405"], now=NOW)
    receipts = home / "receipts"
    assert not receipts.exists() or list(receipts.rglob("*.json")) == []
    assert store.get("m-1").retention_class is RetentionClass.standard


# -- 21-22. holds.py subject_ids: a hold by subject takes every record on it -------------------
def test_a_hold_by_subject_takes_records_filed_under_another_case(store: SqliteStore) -> None:
    """Attacks the case fold of the given subject in subject_ids: a hold placed on
    ``--subject Allergy`` must hold the records filed as "allergy" too; missing one leaves it
    to an erasure of the same subject (invariant 1: never erased while it is to be held)."""
    from memlife.holds import place_hold

    store.put_many([rec("m-1", "Is allergic to peanuts.", subject="allergy"),
                    rec("m-2", "Carries an EpiPen.", subject=" Allergy "),
                    rec("m-3", "Plays the cello.", subject="music")])  # fmt: skip
    out = place_hold(store, actor="u-1", subject="ALLERGY", now=NOW)
    assert sorted(out["held"]) == ["m-1", "m-2"]

    erased = erase(store, "u-1", subject="allergy", now=NOW)

    assert erased["erased"] == [] and sorted(erased["deferred"]) == ["m-1", "m-2"]
    assert store.get("m-1") is not None and store.get("m-2") is not None


def test_a_hold_by_subject_takes_records_whose_subject_was_inferred(store: SqliteStore) -> None:
    """Attacks the inferred subjects in subject_ids: m-2 has no subject of its own; the
    nightly (or ``remember``) inferred "allergy" for it. A hold on that subject holds it."""
    from memlife.holds import place_hold
    from memlife.inferred import InferredSubjects

    store.put_many([rec("m-1", "Is allergic to peanuts.", subject="allergy"),
                    rec("m-2", "Carries an EpiPen.", subject=None)])  # fmt: skip
    InferredSubjects.for_store(store).put("u-1", NS, {"m-2": "allergy"}, "remember")

    out = place_hold(store, actor="u-1", subject="allergy", now=NOW)

    assert sorted(out["held"]) == ["m-1", "m-2"]
    assert store.get("m-2").retention_class is RetentionClass.legal_hold


# -- 23. apply/appliers/hold_release.py: a released RETAINED record is active again ----------
def test_releasing_a_retained_record_makes_it_active_and_applies_its_erasure(
    store: SqliteStore,
) -> None:
    """Attacks ``if r.status is Status.retained`` in the hold_release applier: ``retained``
    is itself a hold (is_held). A release that only changed the retention class would leave
    the record held for ever, its deferred erasure never applied."""
    store.put_many([rec("h", "Owes 500 EUR to Bob.", subject="debt", status="retained",
                        retention_class="legal_hold")])  # fmt: skip
    assert erase(store, "u-1", ids=["h"], now=NOW)["deferred"] == ["h"]

    out = release_hold(store, ["h"], now=NOW + timedelta(hours=1))

    assert out["released"] == ["h"] and [e["erased"] for e in out["erasures"]] == [["h"]]
    assert store.get("h") is None and pending_erasures(store) == []


# -- 24. derived.py forget_shards / forget_actors: rows not yet flushed go too ---------------
@pytest.mark.parametrize("how", ["shards", "actors"])
def test_a_derived_row_not_yet_flushed_is_never_written_after_the_erasure(
    store: SqliteStore, how: str
) -> None:
    """Attacks the ``_pending`` filter of DerivedCache.forget_shards (erasure: forget_for)
    and forget_actors (erase_sweep): a run's derived rows are written in batches; one kept
    in memory for the erased shard when the erasure drops the shard would be flushed after
    it, the inferred key's content words back on disk."""
    from memlife.derived import forget_for

    cache = embedding_cache(store, default_embedder())
    derived = derived_for(cache)
    assert derived is not None
    derived.put(("u-1", NS), "inference", "d-1", {"x": "depression treated"})  # not flushed
    if how == "shards":
        forget_for(cache, {("u-1", NS)})
    else:
        derived.forget_actors({"u-1"})
    derived.flush()
    assert store.connection.execute("SELECT COUNT(*) FROM derived").fetchone()[0] == 0
