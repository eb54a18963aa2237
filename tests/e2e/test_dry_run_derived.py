"""Dry runs answered from the derived cache decide exactly what recomputing decides (issue 16).

A dry run keeps subject inference per shard and staging per group (memlife/derived.py);
this runs one seeded store again and again: the second run infers and stages nothing yet
writes the same report rows and counts; a changed record, policy or model recomputes what
it touches and then equals a run on an empty cache; erasure leaves no derived row of the
erased records' shard (an inferred subject key holds content words).
"""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

import memlife.apply.groups as groups
import memlife.embed
import memlife.inferred.cached as cached
from memlife.demo import generate
from memlife.erase import erase
from memlife.model import MemoryRecord, MemoryType
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.e2e.test_dry_run_fast_paths import ANCHOR, WordHashEmbedder

N = 900
CANARY = "zqxcanary"  # a word the inferred subject key of the canary shard is made of
CANARY_SHARD = ("u-canary", "/users/u-canary/episodes")


def canary_records() -> list[MemoryRecord]:
    texts = [f"{CANARY.title()} hiked the ridge trail with Sam.",
             f"{CANARY.title()} hiked the ridge trail with Sam!",
             "Cooked mushroom risotto for dinner.", "Cooked a mushroom risotto for dinner."]  # fmt: skip
    return [
        MemoryRecord(
            id=f"c-{i}",
            actor_id=CANARY_SHARD[0],
            namespace=CANARY_SHARD[1],
            memory_type=MemoryType.episodic,
            content=t,
            owner="team-a",
            created_at=ANCHOR - timedelta(days=3, hours=-i),
        )  # fmt: skip
        for i, t in enumerate(texts)
    ]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "store" / "memlife.db"
    records = list(generate(N, seed=11, anchor=ANCHOR))
    records += [
        r.model_copy(update={"id": r.id + "-v", "content": r.content.upper() + "!",
                             "created_at": r.created_at + timedelta(hours=1)})
        for r in records[::5]
    ]  # fmt: skip
    store = SqliteStore(path)
    store.put_many(records + canary_records())
    store.close()
    return path


class Calls:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.infer = self.stage = 0
        infer, stage = cached.infer_subjects, groups.stage_group

        def count_infer(*a, **kw):  # type: ignore[no-untyped-def]
            self.infer += 1
            return infer(*a, **kw)

        def count_stage(*a, **kw):  # type: ignore[no-untyped-def]
            self.stage += 1
            return stage(*a, **kw)

        monkeypatch.setattr(cached, "infer_subjects", count_infer)
        monkeypatch.setattr(groups, "stage_group", count_stage)

    def reset(self) -> None:
        self.infer = self.stage = 0


def dry_run(db: Path, home: Path, monkeypatch: pytest.MonkeyPatch,
            embedder: type = WordHashEmbedder, **cfg: object) -> dict:  # fmt: skip
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    monkeypatch.setattr(memlife.embed, "default_embedder", embedder)
    config = RunConfig(dry_run=True, workers=1, now=ANCHOR, store=f"sqlite:///{db}",
                       receipts=f"file://{home / 'receipts'}", **cfg)  # type: ignore[arg-type]  # fmt: skip
    summary = run_local(config).as_json()
    rows = sorted(Path(summary["report"]).read_text().splitlines())
    # a dry run again at one cutoff says it names no receipt (the first's: audit 53o)
    other = {k: v for k, v in summary["other_counts"].items() if k != "dry_run_receipt_taken"}
    return {"rows": rows, "counts": summary["counts"], "other": other,
            "model": summary["model"], "lifecycle": summary["lifecycle"]}  # fmt: skip


def recomputed(db: Path, home: Path, monkeypatch: pytest.MonkeyPatch, **kw: object) -> dict:
    """The same dry run with nothing read from or kept in the derived cache (same embedding
    cache, so the same texts embedded)."""
    with monkeypatch.context() as m:
        m.setattr(groups.StageCache, "open", classmethod(lambda *a: None))
        m.setattr(cached, "derived_for", lambda cache: None)
        return dry_run(db, home, monkeypatch, **kw)  # type: ignore[arg-type]


def derived_rows(home: Path) -> list[tuple[str, str, str, str]]:
    con = sqlite3.connect(home / "embeddings.db")
    try:
        return con.execute("SELECT actor_id, namespace, kind, value FROM derived").fetchall()
    finally:
        con.close()


def test_second_dry_run_is_answered_from_the_cache(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls(monkeypatch)
    home = tmp_path / "home"
    first = dry_run(db, home, monkeypatch)
    infer_all, stage_all = calls.infer, calls.stage
    assert infer_all > 10 and stage_all > 20  # the paths under test ran
    assert first["other"]["consolidation_proposed"] > 20
    assert first["other"]["merged_duplicates"] > 0
    assert {k for _, _, k, _ in derived_rows(home)} == {"inference", "staging", "staging_total"}

    calls.reset()
    second = dry_run(db, home, monkeypatch)
    assert (calls.infer, calls.stage) == (0, 0)  # nothing inferred, no group staged
    calls.reset()
    again = recomputed(db, home, monkeypatch)
    assert calls.infer == infer_all and calls.stage == stage_all  # all computed again
    assert second == again
    assert second["other"]["embedded"] == 0  # the key is there, as when groups are read
    assert second["rows"] == first["rows"] and second["counts"] == first["counts"]


def test_a_changed_record_recomputes_its_shard_only(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls(monkeypatch)
    home = tmp_path / "home"
    before = dry_run(db, home, monkeypatch)
    infer_all, stage_all = calls.infer, calls.stage
    store = SqliteStore(db)
    try:
        # the canary shard's second record says something else now (inference reads it),
        # and a subject group elsewhere gets another member's source (staging reads it)
        changed = canary_records()[1].model_copy(update={"content": "Swam across the lake."})
        staged = [json.loads(row) for row in before["rows"]]
        grouped = sorted(
            d["id"] for d in staged
            if d["action"] == "consolidate_candidate" and "SUBJECT_INFERRED" not in d["reasons"]
        )  # fmt: skip
        r = store.get(grouped[0])
        assert r is not None and r.subject
        store.put_many([changed, r.model_copy(update={"source": "system_of_record"})])
    finally:
        store.close()
    calls.reset()
    after = dry_run(db, home, monkeypatch)
    assert calls.infer == 1  # the canary shard only
    assert 0 < calls.stage < stage_all / 4
    assert after != before  # the change shows (a merge is gone)
    assert after == recomputed(db, home, monkeypatch)  # = the answer without a cache
    assert infer_all > 1


def test_policy_or_model_change_misses(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls(monkeypatch)
    home = tmp_path / "home"
    dry_run(db, home, monkeypatch)
    policy = tmp_path / "policy.yaml"
    from memlife.policy import resolve_policy_path

    text = resolve_policy_path(None).read_text()
    assert "merge_cosine: 0.92" in text
    policy.write_text(text.replace("merge_cosine: 0.92", "merge_cosine: 0.97"))
    calls.reset()
    changed = dry_run(db, home, monkeypatch, policy=str(policy))
    assert calls.infer > 10 and calls.stage > 20  # every shard computed again
    assert changed == recomputed(db, home, monkeypatch, policy=str(policy))

    class Other(WordHashEmbedder):
        model_id = "word-hash-v2"

    calls.reset()
    dry_run(db, home, monkeypatch, embedder=Other)
    assert calls.infer > 10 and calls.stage > 20


def test_erasure_leaves_no_derived_row_of_the_shard(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls(monkeypatch)
    home = tmp_path / "home"
    dry_run(db, home, monkeypatch)
    rows = derived_rows(home)
    canary = [r for r in rows if (r[0], r[1]) == CANARY_SHARD]
    assert any(CANARY in r[3] for r in canary)  # the inferred key holds the word: must go
    others = len(rows) - len(canary)

    store = SqliteStore(db)
    try:
        result = erase(store, CANARY_SHARD[0], ids=["c-0", "c-1"], now=ANCHOR)
    finally:
        store.close()
    assert sorted(result["erased"]) == ["c-0", "c-1"]
    rows = derived_rows(home)
    assert [r for r in rows if (r[0], r[1]) == CANARY_SHARD] == []
    assert len(rows) == others  # the other shards keep theirs
    assert not any(CANARY in r[3] for r in rows)
    for suffix in ("", "-wal"):  # compacted: not in a free page or the WAL either
        f = Path(f"{home / 'embeddings.db'}{suffix}")
        assert not f.exists() or CANARY.encode() not in f.read_bytes()

    calls.reset()
    after = dry_run(db, home, monkeypatch)
    assert calls.infer == 1  # the erased shard is computed again, from what is left
    assert after == recomputed(db, home, monkeypatch)


def test_an_erasure_racing_a_dry_run_leaves_nothing_the_run_wrote_after_it(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The adversary's timing: the dry run has read and inferred the canary shard, then the
    # erasure runs to the end (tombstones, deletes, drops every cache row it can see), and
    # only then does the dry run write the shard's inferred key (a few content words).
    import memlife.derived as derived
    from memlife.model import content_sha256

    home = tmp_path / "home"
    real_put = derived.DerivedCache.put
    raced: list[dict] = []

    def put_after_erasure(self, shard, kind, digest, value):  # type: ignore[no-untyped-def]
        if shard == CANARY_SHARD and kind == "inference" and not raced:
            store = SqliteStore(db)
            try:
                raced.append(erase(store, CANARY_SHARD[0], ids=["c-0", "c-1"], now=ANCHOR))
            finally:
                store.close()
        return real_put(self, shard, kind, digest, value)

    monkeypatch.setattr(derived.DerivedCache, "put", put_after_erasure)
    dry_run(db, home, monkeypatch)
    assert raced and sorted(raced[0]["erased"]) == ["c-0", "c-1"]
    assert not any(CANARY in r[3] for r in derived_rows(home))
    con = sqlite3.connect(home / "embeddings.db")
    try:
        erased = [content_sha256(r.content) for r in canary_records()[:2]]
        q = "SELECT COUNT(*) FROM embeddings WHERE content_sha256 IN (?, ?)"
        assert con.execute(q, erased).fetchone()[0] == 0
    finally:
        con.close()
    for suffix in ("", "-wal"):
        f = Path(f"{home / 'embeddings.db'}{suffix}")
        assert not f.exists() or CANARY.encode() not in f.read_bytes()
