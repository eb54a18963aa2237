"""Issue 12, cases 1-3: erasure closes every copy (replacements, the dry-run cache), and an
erasure that lands inside a nightly run is never undone by it. Each test failed before."""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.consolidate.base import ConsolidationResult, Group
from memlife.consolidate.extractive import ExtractiveConsolidator
from memlife.embed_cache import EmbeddingCache
from memlife.erase import erase
from memlife.model import MemoryRecord, MemoryType, Provenance, Status, content_sha256
from memlife.online.memory import LongTermMemory
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from memlife.tombstones import listing
from tests.support.lifecycle import gate_cases

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)
MARKER = "zqx-copy-canary-3b91e2"
NS = "/users/u-1/facts"


def rec(rid: str, content: str, age: float, **kw: object) -> MemoryRecord:
    fields: dict = dict(
        id=rid,
        actor_id="u-1",
        namespace=NS,
        memory_type=MemoryType.semantic,
        content=content,
        subject="city",
        owner="team-a",
        created_at=NOW - timedelta(days=age),
    )
    fields.update(kw)
    return MemoryRecord(**fields)


ERASED = rec("m-a", f"The user lives in Berlin now ({MARKER}).", 10)
KEPT = rec("m-b", "The user lives in Paris.", 100)
OTHER = rec("m-c", "The user likes jazz.", 5, subject="music")


def everywhere(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def active(store: SqliteStore) -> list[MemoryRecord]:
    return [r for r in store.iter_all() if r.status is Status.active]


def superseded_point_to_active(store: SqliteStore) -> None:
    for r in store.iter_all():
        if r.status is Status.superseded:
            repl = store.get(r.provenance.replaced_by or "")
            assert repl is not None and repl.status is Status.active, r.id


@pytest.fixture()
def db(home: Path) -> Path:
    path = home / "memlife.db"
    with SqliteStore(path) as s:
        s.put_many([ERASED, KEPT, OTHER])
    return path


def test_erasing_a_consolidated_record_rebuilds_its_replacement_from_kept_sources(
    db: Path, home: Path
) -> None:
    night = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=gate_cases(db)))
    assert night.status == "success"
    with SqliteStore(db) as s:
        (repl,) = [r for r in active(s) if r.id.startswith("r-")]
        assert MARKER in repl.content  # the extractive consolidator copied the erased sentence
        assert sorted(repl.provenance.supersedes) == ["m-a", "m-b"]
        memory = LongTermMemory(s)
        assert MARKER in memory.recall("u-1", "Where does the user live?", k=3)[0].record.content
        memory.close()
        result = erase(s, "u-1", ids=["m-a"], now=NOW)
        assert result["status"] == "success" and result["rebuilt"] == [repl.id]
        assert result["erased"] == ["m-a"]
        after = s.get(repl.id)
        assert after is not None and after.status is Status.active
        assert after.content == KEPT.content and after.provenance.supersedes == ["m-b"]
        assert after.created_at == KEPT.created_at  # the erased statement's time went with it
        superseded_point_to_active(s)
        assert all(MARKER not in r.content for r in s.iter_all())
        memory = LongTermMemory(s)
        hits = memory.recall("u-1", "Berlin", k=5, threshold=-1.0)
        assert hits and all(MARKER not in h.record.content for h in hits)
        memory.close()
        stones = listing(s, "u-1")
        assert {t["record_id"] for t in stones} == {"m-a"}
        assert content_sha256(ERASED.content) in {t["content_sha256"] for t in stones}
        assert all(MARKER not in str(t) for t in stones)
    assert everywhere(home, MARKER) == []  # store file, WAL, ledger, reports, receipts


def test_a_model_written_replacement_is_withdrawn_and_its_kept_sources_come_back(
    db: Path, home: Path
) -> None:
    with SqliteStore(db) as s:
        s.put_many(
            [
                ERASED.model_copy(
                    update={
                        "status": Status.superseded,
                        "provenance": Provenance(replaced_by="r-model"),
                    }
                ),
                KEPT.model_copy(
                    update={
                        "status": Status.superseded,
                        "provenance": Provenance(replaced_by="r-model"),
                    }
                ),
                rec(
                    "r-model",
                    f"Moved from Paris to Berlin ({MARKER[:8]}-summary).",
                    1,
                    provenance=Provenance(supersedes=["m-a", "m-b"]),
                ),
            ]
        )
        result = erase(s, "u-1", ids=["m-a"], now=NOW)
        assert result["status"] == "success"
        assert sorted(result["erased"]) == ["m-a", "r-model"] and result["reactivated"] == ["m-b"]
        kept = s.get("m-b")
        assert (
            kept is not None
            and kept.status is Status.active
            and kept.provenance.replaced_by is None
        )
        assert s.get("r-model") is None
        superseded_point_to_active(s)
    assert everywhere(home, MARKER[:8]) == []


def test_same_text_elsewhere_is_erased_too(db: Path) -> None:
    with SqliteStore(db) as s:
        s.put_many([rec("m-copy", ERASED.content.upper(), 3, subject="misc")])
        result = erase(s, "u-1", ids=["m-a"], now=NOW)
        assert sorted(result["erased"]) == ["m-a", "m-copy"]


def test_erasure_clears_the_dry_run_cache(db: Path, home: Path) -> None:
    dry = EmbeddingCache(path=home / "embeddings.db")
    with SqliteStore(db) as s:
        dry.get_or_embed(list(s.iter_all()))
    dry.close()
    dry_run = run_local(RunConfig(dry_run=True, now=NOW))
    assert dry_run.status == "success"
    with SqliteStore(db) as s:
        erase(s, "u-1", subject="city", now=NOW)
    conn = sqlite3.connect(home / "embeddings.db")
    shas = {r[0] for r in conn.execute("SELECT content_sha256 FROM embeddings")}
    conn.close()
    assert shas == {content_sha256(OTHER.content)}
    assert everywhere(home, MARKER) == []


class RacingConsolidator(ExtractiveConsolidator):
    """Runs an erasure on a second connection while 'the model' is thinking."""

    def __init__(self, db: Path, target: str) -> None:
        super().__init__()
        self.db, self.target, self.fired = db, target, False

    def consolidate(self, group: Group) -> ConsolidationResult:
        result = super().consolidate(group)  # read from the records before the erase
        if not self.fired and self.target in group.ids:
            self.fired = True
            with SqliteStore(self.db) as other:
                assert erase(other, "u-1", ids=[self.target], now=NOW)["erased"] == [self.target]
        return result


def test_an_erase_between_group_read_and_replacement_write_is_never_undone(
    db: Path, home: Path
) -> None:
    racer = RacingConsolidator(db, "m-a")
    night = run_local(
        RunConfig(dry_run=False, now=NOW, eval_cases=gate_cases(db)), consolidator=racer
    )
    assert racer.fired
    assert night.status == "success"
    receipt = json.loads(Path(night.receipt or "").read_text())
    counts = receipt["other_counts"]
    # withdrawn before the write (its source is gone: group_resume._sources_moved); an erasure
    # landing later still meets the tombstones inside the write (withdrawn_erased)
    withdrawn = counts.get("consolidation_withdrawn_changed", 0)
    assert withdrawn + counts.get("consolidation_withdrawn_erased", 0) == 1
    with SqliteStore(db) as s:
        assert all(MARKER not in r.content for r in active(s))
        assert s.get("m-a") is None
        kept = s.get("m-b")
        assert kept is not None and kept.status is Status.active  # never superseded by nothing
        superseded_point_to_active(s)
        assert all(
            MARKER not in (o[0] or "")
            for o in s.connection.execute("SELECT payload FROM operations").fetchall()
        )
    # the next night finds nothing to fail on
    second = run_local(
        RunConfig(dry_run=False, now=NOW + timedelta(days=1), eval_cases=gate_cases(db))
    )
    assert second.status == "success"
    with SqliteStore(db) as s:
        assert all(MARKER not in r.content for r in s.iter_all())
        s.checkpoint()
    assert everywhere(Path(os.environ["MEMLIFE_HOME"]), MARKER) == []


def test_an_erase_after_the_source_check_is_refused_inside_the_write(
    db: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second line of defence: an erasure landing after the sources were re-checked
    meets the tombstones in the write's own transaction (withdrawn, payload forgotten)."""
    from memlife.apply import group_resume

    checked = group_resume._sources_moved
    fired: list[str] = []

    def check_then_erase(ex, write, rest):  # type: ignore[no-untyped-def]
        moved = checked(ex, write, rest)
        if not fired and any(o.record_id == "m-a" for o in rest):
            fired.append("m-a")
            with SqliteStore(db) as other:
                assert erase(other, "u-1", ids=["m-a"], now=NOW)["erased"] == ["m-a"]
        return moved

    monkeypatch.setattr(group_resume, "_sources_moved", check_then_erase)
    night = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=gate_cases(db)))
    assert fired and night.status == "success"
    receipt = json.loads(Path(night.receipt or "").read_text())
    assert receipt["other_counts"]["consolidation_withdrawn_erased"] == 1
    with SqliteStore(db) as s:
        assert all(MARKER not in r.content for r in active(s))
        superseded_point_to_active(s)
        assert all(
            MARKER not in (o[0] or "")
            for o in s.connection.execute("SELECT payload FROM operations").fetchall()
        )


def test_the_cli_previews_and_then_reports_the_rebuild(db: Path, home: Path) -> None:
    from typer.testing import CliRunner

    from memlife.cli import app

    assert (
        run_local(RunConfig(dry_run=False, now=NOW, eval_cases=gate_cases(db))).status == "success"
    )
    runner = CliRunner()
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-a", "--json"])
    assert res.exit_code == 0, res.output
    detail = json.loads(res.stdout)["detail"]
    (repl,) = [i for i in detail if i.startswith("r-")]
    assert detail == {"m-a": "ERASURE_REQUEST", repl: "REBUILT_FROM_KEPT_SOURCES"}
    with SqliteStore(db) as s:
        assert MARKER in s.get(repl).content  # a preview changes nothing
    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-a", "--yes", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["erased"] == ["m-a"] and out["rebuilt"] == [repl]
    assert everywhere(home, MARKER) == []
