"""Quarantine: what the gate held back can be listed, restored exactly, or purged; all receipted."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

import memlife.quarantine as quarantine_mod
from memlife.audit import open_sink
from memlife.backends import embedding_cache
from memlife.cli import app
from memlife.journal import OpKind, OpState, open_journal
from memlife.model import RetentionClass, Status, utcnow
from memlife.pipeline import RunConfig, run_local
from memlife.quarantine import forget_snapshots, list_quarantined, purge, purge_candidates
from memlife.review import verify_run
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import ALLERGY_KEPT, FACTS, NOW, ttl_policy, vector_row, write_cases

IDS = ["m-allergy", "m-dog", "m-trip"]


def blocked_run(home: Path, tmp_path: Path, now=NOW) -> dict:  # noqa: ANN001
    cases = write_cases(
        tmp_path / "cases.yaml",
        [
            ALLERGY_KEPT,
        ],
    )
    summary = run_local(
        RunConfig(
            dry_run=False,
            now=now,
            policy=ttl_policy(tmp_path, 30),
            eval_cases=cases,
            consolidate=False,
        )
    )
    assert summary.gate is not None and summary.gate["blocked"]
    return summary.as_json()


def seed(home: Path) -> dict:
    store = SqliteStore(home / "memlife.db")
    store.put_many(FACTS)
    embedding_cache(store).get_or_embed(FACTS)
    before = {r.id: (store.get(r.id), vector_row(store, r)) for r in FACTS}
    store.close()
    return before


def test_cli_list_restore_exactly_and_the_next_night_quarantines_again(
    home: Path, tmp_path: Path
) -> None:
    before = seed(home)
    blocked_run(home, tmp_path)
    runner = CliRunner()
    res = runner.invoke(app, ["quarantine", "list", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert sorted(r["id"] for r in rows) == IDS
    assert all(
        "GATE_BLOCKED" in r["reasons"] and r["quarantined_at"] == NOW.isoformat() for r in rows
    )
    assert "Is allergic" not in res.stdout  # ids, scope, reasons: no content

    res = runner.invoke(app, ["quarantine", "restore", "m-dog", "m-trip", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["counts"] == {"restored": 2}
    store = SqliteStore(home / "memlife.db")
    for rid in ("m-dog", "m-trip"):
        record, vector = before[rid]
        assert store.get(rid) == record  # content, every field, status active again
        assert vector_row(store, record) == vector  # the embedding cache row never moved
    assert store.get("m-allergy").status is Status.quarantined  # type: ignore[union-attr]
    ops = open_journal(store).by_run(out["run_id"])
    assert [(o.kind, o.state) for o in ops] == [(OpKind.restore, OpState.RECEIPTED)] * 2
    manifest = list((home / "receipts" / "runs").rglob(f"{out['run_id']}/manifest.json"))
    receipt = json.loads(Path(out["receipt"]).read_text())
    assert manifest and receipt["mode"] == "manual:restore" and receipt["status"] == "success"
    assert verify_run(open_sink(), store, open_journal(store), out["run_id"]).problems == []
    store.close()

    # The policy still says delete: the next night the gate blocks again. The record already
    # quarantined counts as present "before" (quarantine is a pause, not a verdict), so the
    # verdict still reads as the regression it is, and nothing is deleted.
    summary = blocked_run(home, tmp_path, now=NOW + timedelta(days=1))
    assert summary["gate"]["before"]["failed_cases"] == []
    assert summary["gate"]["after"]["failed_cases"] == ["allergy-kept"]
    assert summary["lifecycle"]["deleted"] == 0
    store = SqliteStore(home / "memlife.db")
    assert {r["id"] for r in list_quarantined(store)} == set(IDS)
    store.close()

    res = runner.invoke(app, ["quarantine", "restore", "m-nope"])
    assert res.exit_code == 3


def test_purge_deletes_old_quarantine_only_and_respects_holds(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(home)
    with monkeypatch.context() as m:  # quarantined (snapshot taken) when the run says
        m.setattr(quarantine_mod, "utcnow", lambda: NOW)
        blocked_run(home, tmp_path)
    store = SqliteStore(home / "memlife.db")
    # a hold placed while quarantined: purge must not delete it
    dog = store.get("m-dog")
    assert dog is not None
    store.put_many([dog.model_copy(update={"retention_class": RetentionClass.legal_hold})])
    young = purge(store, 30, now=NOW + timedelta(days=10))
    assert young["operations"] == [] and store.count([Status.quarantined]) == 3
    store.close()

    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "quarantine",
            "purge",
            "--older-than",
            "30",
            "--now",
            (NOW + timedelta(days=31)).isoformat(),
            "--yes",
            "--json",
        ],
    )
    assert res.exit_code == 3, res.output  # one refused: partial failure
    out = json.loads(res.stdout)
    by_id = {o["record_id"]: o for o in out["operations"]}
    assert by_id["m-allergy"]["outcome"] == "deleted" and by_id["m-trip"]["outcome"] == "deleted"
    assert by_id["m-dog"]["error"] == "LEGAL_HOLD"
    store = SqliteStore(home / "memlife.db")
    assert store.get("m-allergy") is None and store.get("m-dog") is not None
    for o in open_journal(store).by_run(out["run_id"]):
        assert o.kind is OpKind.purge
        if o.state is OpState.RECEIPTED:
            doc = json.loads(
                (home / "receipts" / "operations" / f"{o.operation_id}.json").read_text()
            )
            assert (
                doc["action"] == "purge" and doc["outcome"] == "deleted" and doc["content_sha256"]
            )
    store.close()


def test_purge_refuses_a_reference_time_far_ahead(home: Path, tmp_path: Path) -> None:
    """--now years ahead would make minutes of quarantine look like years: refused (exit 2),
    as `memlife run` refuses it; within 48 h it runs (and nothing is old enough)."""
    seed(home)
    blocked_run(home, tmp_path)
    runner = CliRunner()
    for ahead in (timedelta(days=3), timedelta(days=365 * 5)):
        res = runner.invoke(app, ["quarantine", "purge", "--older-than", "30", "--now",
                                  (utcnow() + ahead).isoformat(), "--yes"])  # fmt: skip
        assert res.exit_code == 2, res.output
        assert "48 h ahead of the clock" in " ".join(res.output.split())
    res = runner.invoke(app, ["quarantine", "purge", "--older-than", "30", "--now",
                              (utcnow() + timedelta(hours=47)).isoformat(), "--yes", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["operations"] == []
    store = SqliteStore(home / "memlife.db")
    assert store.count([Status.quarantined]) == 3
    store.close()


def test_grace_is_real_time_in_quarantine_not_the_runs_cutoff(home: Path, tmp_path: Path) -> None:
    """A replay (run --now months ago) stamps status_changed_at with its cutoff; the grace
    counts from when the records were really quarantined (the snapshot's wall clock)."""
    seed(home)
    blocked_run(home, tmp_path)  # NOW: months before the clock
    store = SqliteStore(home / "memlife.db")
    assert all(q["quarantined_at"] == NOW.isoformat() for q in list_quarantined(store))
    assert purge_candidates(store, 30) == []
    store.close()
    res = CliRunner().invoke(app, ["quarantine", "purge", "--older-than", "30", "--yes", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["operations"] == []
    store = SqliteStore(home / "memlife.db")
    assert store.count([Status.quarantined]) == 3
    # 31 days of real time later they are due (the library takes any reference time)
    later = utcnow() + timedelta(days=31)
    due = purge_candidates(store, 30, later)
    assert sorted(q["id"] for q in due) == IDS
    assert all(q["quarantined_since"] > NOW.isoformat() for q in due)
    # without a snapshot (taken by an older version, say) the run's cutoff is all there is
    forget_snapshots(store, ["m-dog"])
    assert [q["id"] for q in purge_candidates(store, 30)] == ["m-dog"]
    out = purge(store, 30, now=later)
    assert sorted(o["record_id"] for o in out["operations"]) == IDS
    assert store.count([Status.quarantined]) == 0
    store.close()


# -- a quarantined superseded record keeps its chain (session 11) ---------------------------


def _chain(home: Path, tmp_path: Path) -> SqliteStore:
    """S superseded by R long ago (due for deletion); A and E expired; a high-impact case on
    A blocks the night's deletions, so the gate quarantines them (S among them)."""
    from memlife.model import MemoryRecord, MemoryType, Provenance

    def r(rid: str, content: str, **kw: object) -> MemoryRecord:
        base = dict(id=rid, actor_id="u-1", namespace="/users/u-1/preferences",
                    memory_type=MemoryType.semantic, subject="beverage", content=content,
                    created_at=NOW - timedelta(days=150))  # fmt: skip
        return MemoryRecord(**(base | kw))  # type: ignore[arg-type]

    store = SqliteStore(home / "memlife.db")
    store.put_many([
        r("S", "Drinks only green tea, never coffee.", status=Status.superseded,
          status_changed_at=NOW - timedelta(days=140), provenance=Provenance(replaced_by="R")),
        r("R", "Drinks black coffee every morning now.", created_at=NOW - timedelta(days=140),
          provenance=Provenance(supersedes=["S", "E"])),
        r("E", "Drinks decaf only.", expires_at=NOW - timedelta(days=2),
          status=Status.superseded, status_changed_at=NOW - timedelta(days=30),
          provenance=Provenance(replaced_by="R")),
        r("A", "Owns a grey cat named Miso.", subject="pet", expires_at=NOW - timedelta(days=2)),
    ])  # fmt: skip
    store.close()
    cases = write_cases(tmp_path / "cases.yaml", [{
        "id": "pet", "kind": "custom", "query": "What pet does the user have?",
        "actor_id": "u-1", "must_retrieve": ["A"], "impact": "high",
    }])  # fmt: skip
    run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases, consolidate=False))
    store = SqliteStore(home / "memlife.db")
    assert store.get("S").status is Status.quarantined  # type: ignore[union-attr]
    return store


def test_a_quarantined_source_keeps_its_replacement_and_goes_when_it_is_erased(
    home: Path, tmp_path: Path
) -> None:
    """Quarantine cleared replaced_by: an erasure of R missed S (SOURCE_OF_ERASED reads
    it), and a restore then pointed S at the erased R."""
    from memlife.erase import erase

    store = _chain(home, tmp_path)
    assert store.get("S").provenance.replaced_by == "R"  # type: ignore[union-attr]
    out = erase(store, "u-1", ids=["R"], now=NOW)
    assert "S" in out["erased"] and store.get("S") is None
    store.close()


def test_a_restore_never_points_a_record_at_a_replacement_that_is_gone(
    home: Path, tmp_path: Path
) -> None:
    store = _chain(home, tmp_path)
    store.delete_many(["R"])  # gone by other means (another tool)
    store.close()
    res = CliRunner().invoke(app, ["quarantine", "restore", "S", "--json"])
    assert "REPLACEMENT_MISSING" in res.stdout, res.output
    store = SqliteStore(home / "memlife.db")
    assert store.get("S").status is Status.quarantined  # type: ignore[union-attr]
    store.close()


def test_a_snapshot_goes_with_its_record_and_never_reaches_a_record_that_takes_the_id(
    home: Path, tmp_path: Path
) -> None:
    """The nightly delete left E's snapshot; another actor's quarantined E, restored, took
    it: superseded by u-1's R (another tenant's record)."""
    from memlife.model import MemoryRecord, MemoryType

    store = _chain(home, tmp_path)
    assert store.get("E").status is Status.quarantined  # type: ignore[union-attr]
    store.close()
    run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=1), consolidate=False))
    store = SqliteStore(home / "memlife.db")
    assert store.get("E") is None  # deleted by the next night, and its snapshot with it
    store.put_many([MemoryRecord(id="E", actor_id="u-2", namespace="/users/u-2/facts",
                                 memory_type=MemoryType.semantic, content="Plays the cello.",
                                 created_at=NOW, status=Status.quarantined)])  # fmt: skip
    store.close()
    res = CliRunner().invoke(app, ["quarantine", "restore", "E", "--json"])
    assert res.exit_code == 0, res.output
    store = SqliteStore(home / "memlife.db")
    e = store.get("E")
    assert e.status is Status.active and e.provenance.replaced_by is None  # type: ignore[union-attr]
    store.close()


def test_a_quarantined_record_without_a_snapshot_goes_back_behind_its_replacement(
    home: Path, tmp_path: Path
) -> None:
    """A migrated store has no snapshots: restore made a superseded fact active again."""
    store = _chain(home, tmp_path)
    forget_snapshots(store, ["S"])
    quarantined_at = store.get("S").status_changed_at  # type: ignore[union-attr]
    # a restore with a cutoff far back (the library takes one; review of session 31): the
    # restored record's superseded retention must not start then, or the next night
    # deletes it
    quarantine_mod.restore(store, ["S"], now=NOW - timedelta(days=400))
    store.close()
    store = SqliteStore(home / "memlife.db")
    s = store.get("S")
    assert s.status is Status.superseded and s.provenance.replaced_by == "R"  # type: ignore[union-attr]
    assert s.status_changed_at is not None and s.status_changed_at >= quarantined_at  # type: ignore[union-attr, operator]
    store.close()


def test_a_restore_goes_behind_the_active_end_of_its_replacements_chain(home: Path) -> None:
    """Review of session 11: R, superseded by R2 after S was quarantined, was still what S
    went back behind (a record superseded by a superseded one: invariant 3)."""
    from memlife.model import MemoryRecord, MemoryType, Provenance

    def r(rid: str, content: str, **kw: object) -> MemoryRecord:
        base = dict(id=rid, actor_id="u-1", namespace="/users/u-1/preferences",
                    memory_type=MemoryType.semantic, subject="beverage", content=content,
                    created_at=NOW - timedelta(days=10))  # fmt: skip
        return MemoryRecord(**(base | kw))  # type: ignore[arg-type]

    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            r("S", "Drinks only green tea.", status=Status.quarantined,
              provenance=Provenance(replaced_by="R")),
            r("R", "Drinks coffee now.", status=Status.superseded,
              provenance=Provenance(supersedes=["S"], replaced_by="R2")),
            r("R2", "Drinks black coffee every morning now.",
              provenance=Provenance(supersedes=["R"])),
        ])  # fmt: skip
    res = CliRunner().invoke(app, ["quarantine", "restore", "S", "--json"])
    assert res.exit_code == 0, res.output
    with SqliteStore(home / "memlife.db") as store:
        s = store.get("S")
        assert s.status is Status.superseded and s.provenance.replaced_by == "R2"  # type: ignore[union-attr]
