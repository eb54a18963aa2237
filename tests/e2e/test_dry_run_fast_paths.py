"""The dry run's batched reads decide exactly what the per-record reads decide (issue 16).

Staging reads a shard's groups a batch at a time (apply/group_reads.GroupReads) instead of
three reads per group; this runs the same seeded store through both and compares every
report row and count. A hashed bag-of-words embedder stands in for MiniLM (fast, and
similar sentences get similar vectors, so near duplicates and contradictions occur).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

import memlife.apply.group_reads as group_reads
import memlife.embed
from memlife.demo import generate
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)
N = 1200


class WordHashEmbedder:
    """Sum of a fixed pseudo-random vector per lower-case word, plus a little of one for the
    exact text (restatements differ slightly, as with a real model), L2-normalised."""

    model_id = "word-hash-v1"
    dim = 64

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", t.lower()):
                seed = int.from_bytes(hashlib.sha256(w.encode()).digest()[:4], "big")
                out[i] += np.random.default_rng(seed).standard_normal(self.dim)
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:4], "big")
            out[i] += 0.3 * np.random.default_rng(seed).standard_normal(self.dim)
            out[i] /= np.linalg.norm(out[i]) or 1.0
        return out


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fast") / "memlife.db"
    records = list(generate(N, seed=7, anchor=ANCHOR))
    # restatements in other words' case and punctuation: the same statement key, another
    # text (and vector), so which record stands for a statement matters
    records += [
        r.model_copy(update={"id": r.id + "-v", "content": r.content.upper() + "!",
                             "created_at": r.created_at + timedelta(hours=1)})
        for r in records[::4]
    ]  # fmt: skip
    store = SqliteStore(path)
    store.put_many(records)
    store.close()
    return path


def dry_run(db: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    monkeypatch.setattr(memlife.embed, "default_embedder", WordHashEmbedder)
    cfg = RunConfig(dry_run=True, workers=1, now=ANCHOR, store=f"sqlite:///{db}",
                    receipts=f"file://{home / 'receipts'}")  # fmt: skip
    summary = run_local(cfg).as_json()
    rows = sorted(Path(summary["report"]).read_text().splitlines())
    return {"rows": rows, "counts": summary["counts"], "other": summary["other_counts"],
            "model": summary["model"], "lifecycle": summary["lifecycle"]}  # fmt: skip


def test_batched_group_reads_decide_as_per_group_reads(
    demo_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batched = dry_run(demo_db, tmp_path / "batched", monkeypatch)
    assert batched["other"]["consolidation_proposed"] > 20  # the path under test ran
    assert batched["other"]["merged_duplicates"] > 0
    assert batched["other"]["contradictions_resolved"] > 0
    assert len(batched["rows"]) == N + N // 4

    per_group = []
    monkeypatch.setattr(
        group_reads.GroupReads, "group",
        lambda self, i: per_group.append(i) or group_reads.Reads(self.ex, self.groups[i], self.tally),
    )  # fmt: skip
    single = dry_run(demo_db, tmp_path / "single", monkeypatch)
    assert per_group  # every group read on its own
    assert single == batched
    monkeypatch.undo()

    # tiny batches: batch boundaries everywhere, and groups over the chunk read on their own
    monkeypatch.setattr(group_reads, "READ_CHUNK", 3)
    small = dry_run(demo_db, tmp_path / "small", monkeypatch)
    assert small == batched
