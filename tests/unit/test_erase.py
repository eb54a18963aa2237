"""Targeted erasure: records and everything derived from them, gone from every byte on disk."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.backends import embedding_cache
from memlife.cli import app
from memlife.erase import EraseError, erase, pending_erasures, select_targets
from memlife.evalset import parse_cases
from memlife.evidence_key import keyed
from memlife.gate import ShadowRecall, evaluate
from memlife.journal import Operation, OpKind, OpState, open_journal
from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, MemoryType, Provenance, RetentionClass, Status
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 6, 1, tzinfo=UTC)
MARKER = "zqx-erase-canary-5f1e9b27"  # unique: must be found nowhere after the erasure
HELD_MARKER = "zqx-held-canary-0a8d44c1"


def rec(
    rid: str,
    content: str,
    *,
    actor: str = "u-1",
    ns: str = "facts",
    subject: str | None = None,
    status: Status = Status.active,
    replaced_by: str | None = None,
    supersedes: tuple[str, ...] = (),
    retention: RetentionClass = RetentionClass.standard,
    age: float = 50,
) -> MemoryRecord:
    return MemoryRecord(
        id=rid,
        actor_id=actor,
        namespace=f"/users/{actor}/{ns}",
        memory_type=MemoryType.semantic,
        content=content,
        subject=subject,
        owner="team-a",
        created_at=NOW - timedelta(days=age),
        status=status,
        retention_class=retention,
        provenance=Provenance(replaced_by=replaced_by, supersedes=list(supersedes)),
    )


def verify(store: SqliteStore, run_id: str) -> list[dict]:
    from memlife.audit import open_sink
    from memlife.review import verify_run

    return verify_run(open_sink(), store, open_journal(store), run_id).problems


def disk_count(db: Path, needle: str) -> dict[str, int]:
    """Occurrences of ``needle`` in the database file, its WAL and its shared-memory index."""
    out = {}
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{db}{suffix}")
        out[p.name] = p.read_bytes().count(needle.encode()) if p.exists() else 0
    return out


def everywhere(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


RECORDS = [
    rec(
        "m-nut1",
        f"Is allergic to peanuts ({MARKER}).",
        subject="allergy",
        status=Status.superseded,
        replaced_by="r-nut",
        age=300,
    ),
    rec(
        "m-nut2",
        f"Allergic to peanuts and cashews, carries an EpiPen ({MARKER}).",
        subject="Allergy",
        status=Status.superseded,
        replaced_by="r-nut",
        age=100,
    ),
    rec(
        "r-nut",
        f"Allergic to peanuts and cashews; carries an EpiPen ({MARKER}).",
        subject="allergy",
        supersedes=("m-nut1", "m-nut2"),
        age=10,
    ),
    # built only from erased records, filed under another subject: derived, so erased too
    rec(
        "r-health",
        f"Health summary: nut allergy, EpiPen ({MARKER}).",
        subject="health",
        supersedes=("m-nut1", "m-nut2"),
        age=5,
    ),
    # built from an erased record AND a kept one: stays
    rec("m-dog", "Has a dog named Rex.", subject="pet", age=30),
    # the same allergy for another actor: never touched
    rec("m-other", "Is allergic to peanuts.", actor="u-2", subject="allergy"),
]


def test_erasure_leaves_no_byte_of_the_erased_content(home: Path) -> None:
    db = home / "memlife.db"
    store = SqliteStore(db)
    store.put_many(RECORDS)
    cache = embedding_cache(store)
    cache.get_or_embed(RECORDS)
    erased_shas = {r.sha256 for r in RECORDS if MARKER in r.content}
    # online recall logs accesses to the ledger; a crashed run left a payload with content
    memory = LongTermMemory(store, cache=cache)
    hits = memory.recall("u-1", "Does the user have a nut allergy?", k=3)
    assert "r-nut" in {h.record.id for h in hits}
    memory.close()
    journal = open_journal(store)
    journal.plan(
        [
            Operation(
                operation_id="op-crashed",
                run_id="run-x",
                kind=OpKind.write_replacement,
                actor_id="u-1",
                namespace="/users/u-1/facts",
                record_id="r-nut",
                reasons=["CONSOLIDATION"],
                policy_version="v",
                payload=RECORDS[2].to_json(),
            )
        ]
    )
    assert sum(disk_count(db, MARKER).values()) > 0  # the canary is on disk before
    q = "SELECT content_sha256 FROM embeddings WHERE model_id LIKE '%#tokens'"
    assert erased_shas <= {r[0] for r in store.connection.execute(q)}  # token codes too

    result = erase(store, "u-1", subject="allergy", now=NOW)

    assert result["status"] == "success" and result["run_id"].startswith("manual-")
    assert result["erased"] == ["m-nut1", "m-nut2", "r-health", "r-nut"]
    assert result["derived"] == ["r-health"] and result["deferred"] == []
    assert result["counts"]["ledger_rows_erased"] >= 1
    assert result["compaction"] == {"vacuumed": True, "wal_busy": 0}
    # no byte of the content left: not in the file, not in the WAL, not in the -shm
    assert disk_count(db, MARKER) == {"memlife.db": 0, "memlife.db-wal": 0, "memlife.db-shm": 0}
    assert everywhere(home, MARKER) == []  # ledger, receipts, reports: ids and hashes only
    # derived data gone: vectors, ledger rows, the journal payload
    # (vectors and token codes: recall stored the codes of its candidates, erased ones too)
    rows = store.connection.execute("SELECT content_sha256, model_id FROM embeddings").fetchall()
    assert erased_shas.isdisjoint({r[0] for r in rows}) and len({r[0] for r in rows}) == 2
    assert sum(r[1].endswith("#tokens") for r in rows) == 2
    ledger_ids = set(AccessLedger().read().column("record_id").to_pylist())
    assert ledger_ids.isdisjoint({"m-nut1", "m-nut2", "r-nut", "r-health"})
    assert journal.get("op-crashed").payload is None  # type: ignore[union-attr]
    # what stays: other subjects, other actors
    assert store.get("m-dog") is not None and store.get("m-other") is not None
    # recall cannot return them (online recall, and the gate's recall with an erased case)
    memory = LongTermMemory(store)
    assert {h.record.actor_id for h in memory.recall("u-1", "nut allergy EpiPen", k=5)} <= {"u-1"}
    assert not {h.record.id for h in memory.recall("u-1", "nut allergy EpiPen", k=5)} & set(
        result["erased"]
    )
    assert ShadowRecall(store).recall(
        "Allergic to peanuts and cashews", "u-1", threshold=-1.0, k=10
    ) == [store.get("m-dog")]
    case = parse_cases(
        [
            {
                "id": "erased-allergy",
                "kind": "erased",
                "query": "peanut allergy",
                "actor_id": "u-1",
                "forbidden": ["r-nut", {"claim": MARKER}],
            }
        ]
    )
    assert evaluate(store, case)["failed_cases"] == []
    # receipts: one per erased record, action erase, a hash and no content
    for o in journal.by_run(result["run_id"]):
        assert o.kind is OpKind.erase and o.state is OpState.RECEIPTED
        doc = json.loads((home / "receipts" / "operations" / f"{o.operation_id}.json").read_text())
        assert (
            doc["action"] == "erase"
            and doc["outcome"] == "deleted"
            and doc["content_sha256"] in {keyed(s, journal.run_secret()) for s in erased_shas}
        )
    store.close()
    assert disk_count(db, MARKER) == {"memlife.db": 0, "memlife.db-wal": 0, "memlife.db-shm": 0}


def test_erase_by_id_takes_the_sources_of_an_erased_replacement(home: Path) -> None:
    store = SqliteStore(home / "memlife.db")
    store.put_many(RECORDS)
    targets, why = select_targets(store, "u-1", ids=["r-nut"])
    assert {r.id: why[r.id] for r in targets} == {
        "r-nut": "ERASURE_REQUEST",
        "m-nut1": "SOURCE_OF_ERASED",
        "m-nut2": "SOURCE_OF_ERASED",
        "r-health": "DERIVED_REPLACEMENT",
    }
    with pytest.raises(EraseError, match="do not belong to actor u-1"):
        select_targets(store, "u-1", ids=["m-other"])
    with pytest.raises(EraseError):
        select_targets(store, "u-1")
    store.close()


def _replacement_of_two(retention: tuple[RetentionClass, RetentionClass]) -> list[MemoryRecord]:
    """m-a and m-b (same subject) consolidated into r-1, whose text is m-a's verbatim."""
    held_r, held_b = retention
    return [
        rec("m-a", "The user lives in Berlin.", subject="city", status=Status.superseded,
            replaced_by="r-1"),
        rec("m-b", "The user lives in Berlin, Germany.", subject="city", status=Status.superseded,
            replaced_by="r-1", retention=held_b),
        rec("r-1", "The user lives in Berlin.", subject="city", supersedes=("m-a", "m-b"),
            retention=held_r, age=10),
    ]  # fmt: skip


def test_a_held_replacement_is_not_rebuilt_by_an_erasure(home: Path) -> None:
    """Adversarial review: erasing m-a once rewrote the held r-1 (its text and supersedes)."""
    store = SqliteStore(home / "memlife.db")
    records = _replacement_of_two((RetentionClass.legal_hold, RetentionClass.standard))
    store.put_many(records)
    out = erase(store, "u-1", ids=["m-a"], now=NOW)
    assert out["deferred"] == ["r-1"] and out["rebuilt"] == [] and out["erased"] == ["m-a"]
    assert store.get("r-1") == records[2]  # untouched, byte for byte
    store.close()


def test_a_replacement_a_held_source_points_to_is_not_erased(home: Path) -> None:
    """Invariant 3 under a hold: erasing r-1 would leave the held m-b superseded by nothing."""
    store = SqliteStore(home / "memlife.db")
    store.put_many(_replacement_of_two((RetentionClass.standard, RetentionClass.legal_hold)))
    out = erase(store, "u-1", ids=["r-1"], now=NOW)
    assert sorted(out["deferred"]) == ["m-b", "r-1"] and out["erased"] == ["m-a"]
    m_b, r_1 = store.get("m-b"), store.get("r-1")
    assert m_b.provenance.replaced_by == "r-1" and r_1.status is Status.active
    store.close()


def test_a_withdrawn_replacement_a_held_source_points_to_is_deferred(home: Path) -> None:
    """Adversarial review: R (model text) of held A and B; erasing B withdrew R and tried
    to reactivate A (refused: held), leaving A superseded by nothing."""
    store = SqliteStore(home / "memlife.db")
    store.put_many([
        rec("m-a", "Has a dog named Rex.", subject="pets", status=Status.superseded,
            replaced_by="r-1", retention=RetentionClass.legal_hold),
        rec("m-b", "Has a cat named Tom.", subject="pets", status=Status.superseded,
            replaced_by="r-1"),
        rec("r-1", "Has a dog named Rex and a cat named Tom.", subject="pets",
            supersedes=("m-a", "m-b"), age=10),
    ])  # fmt: skip
    out = erase(store, "u-1", ids=["m-b"], now=NOW)
    assert out["status"] == "success" and out["erased"] == ["m-b"]
    assert out["deferred"] == ["r-1"] and out["reactivated"] == []
    assert store.get("m-a").provenance.replaced_by == "r-1"
    assert store.get("r-1").status is Status.active  # invariant 3 while the hold stands
    store.close()


def test_legal_hold_defers_the_erasure_until_released(home: Path) -> None:
    db = home / "memlife.db"
    store = SqliteStore(db)
    held = rec(
        "m-pass",
        f"Passport number ends in 4411 ({HELD_MARKER}).",
        subject="passport",
        retention=RetentionClass.legal_hold,
    )
    free = rec("m-pass2", f"Passport renewed in March ({MARKER}).", subject="passport")
    store.put_many([held, free, RECORDS[4]])
    embedding_cache(store).get_or_embed([held, free])
    store.close()
    runner = CliRunner()

    res = runner.invoke(
        app, ["erase", "--actor", "u-1", "--subject", "passport", "--yes", "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["erased"] == ["m-pass2"] and out["deferred"] == ["m-pass"]
    store = SqliteStore(db)
    assert store.get("m-pass") == held  # the hold wins: untouched
    [op] = [o for o in open_journal(store).for_record("m-pass") if o.kind is OpKind.erase]
    assert op.state is OpState.FAILED and op.last_error == "LEGAL_HOLD"
    doc = json.loads((home / "receipts" / "deferrals" / f"{op.operation_id}.json").read_text())
    assert doc["outcome"] == "deferred" and "ERASURE_DEFERRED" in doc["reason_codes"]
    # the content hash keyed by the store's secret: the receipt gives no content back
    assert doc["action"] == "erase" and doc["content_sha256"] != held.sha256
    assert doc["content_sha256"] == keyed(held.sha256, open_journal(store).run_secret())
    assert verify(store, out["run_id"]) == []
    assert [p["record_id"] for p in pending_erasures(store)] == ["m-pass"]
    # a later erase call leaves a still-held record alone
    again = erase(store, None, now=NOW)
    assert again["erased"] == [] and store.get("m-pass") is not None
    store.close()
    assert (
        sum(disk_count(db, MARKER).values()) == 0 and sum(disk_count(db, HELD_MARKER).values()) > 0
    )

    res = runner.invoke(app, ["hold", "release", "--id", "m-pass", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["released"] == ["m-pass"]
    assert [e["erased"] for e in out["erasures"]] == [["m-pass"]]
    store = SqliteStore(db)
    assert store.get("m-pass") is None and pending_erasures(store) == []
    assert store.get("m-dog") is not None
    erase_ops = [o for o in open_journal(store).for_record("m-pass") if o.kind is OpKind.erase]
    assert sorted(o.state for o in erase_ops) == [
        OpState.FAILED,
        OpState.RECEIPTED,
    ]  # deferral kept
    store.close()
    assert disk_count(db, HELD_MARKER) == {
        "memlife.db": 0,
        "memlife.db-wal": 0,
        "memlife.db-shm": 0,
    }
    assert everywhere(home, HELD_MARKER) == []


def test_released_by_other_means_is_applied_by_the_next_erase_call(home: Path) -> None:
    store = SqliteStore(home / "memlife.db")
    held = rec(
        "m-h", f"Held fact ({HELD_MARKER}).", subject="case-17", retention=RetentionClass.legal_hold
    )
    store.put_many([held])
    assert erase(store, "u-1", ids=["m-h"], now=NOW)["deferred"] == ["m-h"]
    store.put_many(
        [held.model_copy(update={"retention_class": RetentionClass.standard})]
    )  # re-import
    out = erase(store, "u-1", now=NOW + timedelta(hours=1))
    assert out["released"] == ["m-h"] and out["erased"] == ["m-h"]
    assert store.get("m-h") is None and pending_erasures(store) == []
    store.close()


# -- a released hold finishes the erasure it deferred, as that erasure would have (session 11)


def test_releasing_a_held_tainted_replacement_rebuilds_it_and_keeps_its_kept_source(
    home: Path,
) -> None:
    """The release once planned the held replacement as a request of its own: r-1 was
    erased and with it m-b (SOURCE_OF_ERASED), whose text nobody asked to erase."""
    from memlife.erase import release_hold

    store = SqliteStore(home / "memlife.db")
    store.put_many(_replacement_of_two((RetentionClass.legal_hold, RetentionClass.standard)))
    assert erase(store, "u-1", ids=["m-a"], now=NOW)["deferred"] == ["r-1"]
    out = release_hold(store, ["r-1"], now=NOW)
    [done] = out["erasures"]
    assert done["erased"] == [] and done["rebuilt"] == ["r-1"]
    assert store.get("m-b").status is Status.superseded  # kept, still behind its replacement
    r_1 = store.get("r-1")
    assert (
        r_1.provenance.supersedes == ["m-b"] and r_1.content == "The user lives in Berlin, Germany."
    )
    assert r_1.retention_class is RetentionClass.standard and pending_erasures(store) == []
    assert store.get("m-a") is None
    store.close()


def test_releasing_a_held_source_applies_the_erasure_its_hold_pinned(home: Path) -> None:
    """r-1 (model text of m-a and the held m-b) was deferred with m-b's hold; releasing m-b
    withdrew nothing: r-1, with the erased claim, stayed active until `erase --pending`."""
    from memlife.erase import release_hold

    store = SqliteStore(home / "memlife.db")
    store.put_many([
        rec("m-a", "Takes lithium every day.", subject="meds", status=Status.superseded,
            replaced_by="r-1"),
        rec("m-b", "Takes vitamin D daily.", subject="meds", status=Status.superseded,
            replaced_by="r-1", retention=RetentionClass.legal_hold),
        rec("r-1", "Takes lithium and vitamin D every day.", subject="meds",
            supersedes=("m-a", "m-b"), age=10),
    ])  # fmt: skip
    assert erase(store, "u-1", ids=["m-a"], now=NOW)["deferred"] == ["r-1"]
    out = release_hold(store, ["m-b"], now=NOW)
    assert [e["erased"] for e in out["erasures"]] == [["r-1"]]
    assert store.get("r-1") is None
    m_b = store.get("m-b")
    assert m_b.status is Status.active and m_b.provenance.replaced_by is None
    assert pending_erasures(store) == []
    store.close()


def test_a_pending_erasure_never_reaches_another_record_that_took_its_id(home: Path) -> None:
    """u-1's held X was deferred; its hold went by other means and X was deleted; u-2 then
    wrote a record X. `erase --pending` erased u-2's record (the row's actor unread)."""
    store = SqliteStore(home / "memlife.db")
    store.put_many([rec("X", "Owes 500 EUR to Bob.", retention=RetentionClass.legal_hold)])
    assert erase(store, "u-1", ids=["X"], now=NOW)["deferred"] == ["X"]
    store.delete_many(["X"])  # gone by other means (an expiry, an operator)
    other = rec("X", "Plays the cello.", actor="u-2")
    store.put_many([other])
    out = erase(store, None, now=NOW)
    assert out["erased"] == [] and out["released"] == []
    assert store.get("X") == other and pending_erasures(store) == []  # the stale row is gone
    store.close()


def test_a_hold_placed_after_selection_defers_the_erasure(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hold that takes no lease (an import, another tool) lands between selection and the
    delete: the applier refuses (LEGAL_HOLD) and the request was lost. It is deferred now;
    a hold placed through memlife waits for the erasure's lease."""
    import memlife.erase as erasure
    from memlife.erase import release_hold

    store = SqliteStore(home / "memlife.db")
    store.put_many([rec("x", "Was treated for depression in 2025.", subject="health")])
    real = erasure.manual_run

    def hold_first(*args: object, **kwargs: object) -> object:
        hold = subprocess.run(  # memlife's own hold (another process) meets the lease
            [sys.executable, "-m", "memlife", "hold", "place", "--id", "x"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert hold.returncode != 0 and "another run holds the lock" in hold.stderr + hold.stdout
        with SqliteStore(home / "memlife.db") as other:  # a writer that takes no lease
            held = other.get("x").model_copy(update={"retention_class": RetentionClass.legal_hold})
            other.put_many([held])
        return real(*args, **kwargs)

    monkeypatch.setattr(erasure, "manual_run", hold_first)
    out = erase(store, "u-1", ids=["x"], now=NOW)
    monkeypatch.setattr(erasure, "manual_run", real)
    assert out["erased"] == [] and out["deferred"] == ["x"]
    assert [p["record_id"] for p in pending_erasures(store)] == ["x"]
    assert store.get("x").retention_class is RetentionClass.legal_hold
    done = release_hold(store, ["x"], now=NOW)
    assert [e["erased"] for e in done["erasures"]] == [["x"]] and store.get("x") is None
    store.close()


def test_a_copy_of_erased_text_goes_on_release_even_when_its_id_was_used_again(
    home: Path,
) -> None:
    """Review of session 11: the erased X's id, written again with other text (LangGraph
    ids are derived from the key), hid the erased text's keys; the held copy H survived."""
    from memlife import tombstones
    from memlife.erase import release_hold

    store = SqliteStore(home / "memlife.db")
    store.put_many([
        rec("X", "Takes lithium every day."),
        rec("H", "Takes lithium every day.", ns="notes", retention=RetentionClass.legal_hold),
    ])  # fmt: skip
    assert erase(store, "u-1", ids=["X"], now=NOW)["deferred"] == ["H"]
    assert tombstones.insert_new(  # reused after the erasure (audit 49vi)
        store,
        [rec("X", "Takes vitamin D daily.").model_copy(update={"created_at": datetime.now(UTC)})],
    ).succeeded == ["X"]
    out = release_hold(store, ["H"], now=NOW)
    assert [e["erased"] for e in out["erasures"]] == [["H"]]
    assert store.get("H") is None and store.get("X").content == "Takes vitamin D daily."
    store.close()


def test_a_pinned_request_is_deferred_once_not_again_on_every_pending_pass(home: Path) -> None:
    """Review of session 11: R (asked for, pinned by the held S) got a new operation and
    deferral receipt on every `erase --pending`, and was reported released."""
    store = SqliteStore(home / "memlife.db")
    store.put_many([
        rec("S", "Takes vitamin D daily.", subject="meds", status=Status.superseded,
            replaced_by="R", retention=RetentionClass.legal_hold),
        rec("T", "Takes lithium.", subject="meds", status=Status.superseded, replaced_by="R"),
        rec("R", "Takes lithium and vitamin D.", subject="meds", supersedes=("S", "T"), age=5),
    ])  # fmt: skip
    assert sorted(erase(store, "u-1", ids=["R"], now=NOW)["deferred"]) == ["R", "S"]
    receipts = lambda: sorted((home / "receipts").rglob("deferrals/*.json"))  # noqa: E731
    first = receipts()
    for day in (1, 2):
        out = erase(store, None, now=NOW + timedelta(days=day))
        assert out["released"] == [] and out["erased"] == []
    assert receipts() == first and len(first) == 2
    assert store.get("R").status is Status.active and store.get("T") is None
    store.close()


def test_the_evidence_cannot_confirm_the_subject_an_erasure_was_asked_by(home: Path) -> None:
    """`erase --subject diet` keeps the subject out of every file, but the run key was a
    plain sha256 of the request, whose other parts the receipts hold: a dictionary of
    subjects recovered it (session 24 review). The key is keyed by the store's secret now;
    the same request at the same time is still the same run."""
    import hashlib

    from memlife.audit import open_sink

    store = SqliteStore(home / "memlife.db")
    store.put_many([rec("m-1", "Follows a vegan meal plan.", subject="diet"),
                    rec("m-2", "Has a dog named Rex.", subject="pet")])  # fmt: skip
    out = erase(store, "u-1", subject="diet", now=NOW, receipts=f"file://{home / 'receipts'}")
    sink = open_sink(f"file://{home / 'receipts'}")
    manifest = next(
        json.loads(sink.get(k) or b"{}") for k in sink.list("runs/")
        if out["run_id"] in k and k.endswith("manifest.json")
    )  # fmt: skip
    evidence = b"".join(sink.get(k) or b"" for k in sink.list("runs/") if out["run_id"] in k)
    assert b"diet" not in evidence
    for guess in ("allergy", "diet", "pet"):
        for pending in (True, False):
            raw = json.dumps({"action": "erase", "request": {"actor": "u-1", "subject": guess,
                              "ids": [], "pending": pending}, "at": NOW.isoformat()},
                             sort_keys=True, default=str)  # fmt: skip
            digest = hashlib.sha256(raw.encode()).hexdigest()
            assert digest != manifest["run_key"] and digest[:10] not in out["run_id"]
    # a rerun of the same request at the same time is the same run (the key is the store's)
    again = erase(store, "u-1", subject="diet", now=NOW, receipts=f"file://{home / 'receipts'}")
    assert again["run_id"] == out["run_id"]
    store.close()
