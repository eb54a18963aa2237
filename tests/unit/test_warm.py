"""`memlife warm`: what active memories lack (vectors, token codes) embedded and stored once."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.embed_cache import EmbeddingCache
from memlife.erase import erase
from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, MemoryType, content_sha256, utcnow
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore

NS = "/users/{}/facts"
FACTS = {
    "u-1": ["Maria adopted a grey cat named Pixel.", "Maria works night shifts at the hospital."],
    "u-2": ["Jon opened a dance studio downtown.", "Jon's studio teaches salsa on Fridays."],
}
EXPIRED = "Maria's parking permit for the old garage."


def rec(rid: str, actor: str, content: str, **kw: object) -> MemoryRecord:
    base = dict(id=rid, actor_id=actor, namespace=NS.format(actor), content=content,
                memory_type=MemoryType.semantic, created_at=utcnow() - timedelta(days=3))  # fmt: skip
    return MemoryRecord(**(base | kw))  # type: ignore[arg-type]


def rows(store: SqliteStore, text: str) -> list[str]:
    q = "SELECT model_id FROM embeddings WHERE content_sha256 = ? ORDER BY model_id"
    return [m for (m,) in store.connection.execute(q, (content_sha256(text),))]


@pytest.fixture()
def old_store(home: Path) -> Path:
    """Records imported without any vector (a model change looks the same), one expired."""
    db = home / "memlife.db"
    with SqliteStore(db) as store:
        store.put_many([rec(f"{a}-{i}", a, t) for a, ts in FACTS.items() for i, t in enumerate(ts)])
        store.put_many([rec("x", "u-1", EXPIRED, expires_at=utcnow() - timedelta(hours=1))])
    return db


def warm(db: Path, *extra: str) -> dict:
    res = CliRunner().invoke(app, ["warm", "--store", f"sqlite:///{db}", "--json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_warm_stores_every_live_vector_and_codes_once(old_store: Path) -> None:
    out = warm(old_store)
    assert out["shards"] == 2 and out["records"] == 4 and out["embedded"] == 4
    with SqliteStore(old_store) as store:
        for text in (t for ts in FACTS.values() for t in ts):
            assert len(rows(store, text)) == 2  # the vector and its token codes
        assert rows(store, EXPIRED) == []  # left to the night that deletes it
    assert warm(old_store)["embedded"] == 0  # a second warm finds everything stored


def test_after_warm_recall_computes_no_codes(
    old_store: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written before token codes existed has vectors only: every recall process
    computes the codes it needs in memory, never storing them (recall does not write).
    After warm, recall reads them all (the expired record, never stored, is the only text
    still embedded in memory)."""
    embedded: list[str] = []
    real = EmbeddingCache._embed_fresh

    def spy(self: EmbeddingCache, texts: list[str], shas: list[str], **kw: bool) -> object:
        embedded.extend(texts)
        return real(self, texts, shas, **kw)

    warm(old_store)
    monkeypatch.setattr(EmbeddingCache, "_embed_fresh", spy)
    question = "which cat did Maria adopt?"
    with SqliteStore(old_store) as store:
        store.connection.execute("DELETE FROM embeddings WHERE model_id LIKE '%#tokens'")
        LongTermMemory(store, ledger=AccessLedger(home / "l0")).recall("u-1", question)
        assert set(FACTS["u-1"]) <= set(embedded)  # codes computed, in memory only
    assert warm(old_store)["embedded"] == 4
    embedded.clear()
    with SqliteStore(old_store) as store:
        hits = LongTermMemory(store, ledger=AccessLedger(home / "l1")).recall("u-1", question)
        assert hits and hits[0].record.content == FACTS["u-1"][0]
    assert set(embedded) <= {EXPIRED}


def test_warm_for_one_actor_touches_no_other(old_store: Path) -> None:
    out = warm(old_store, "--actor", "u-2")
    assert out["shards"] == 1 and out["embedded"] == 2
    with SqliteStore(old_store) as store:
        assert all(rows(store, t) == [] for t in FACTS["u-1"])
        assert all(len(rows(store, t)) == 2 for t in FACTS["u-2"])


@pytest.mark.parametrize("removal", ["erase", "delete"])
def test_a_removal_racing_warm_leaves_no_vector_or_codes(
    old_store: Path, home: Path, monkeypatch: pytest.MonkeyPatch, removal: str
) -> None:
    """The removal lands between warm's read of the records and its write: an erasure
    (leaves a tombstone) or a plain delete (a reviewer's, the night's: leaves none)."""
    secret = FACTS["u-1"][1]
    with SqliteStore(old_store) as store:
        mem = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
        real, removed = mem.cache.get_or_embed, []

        def racing(records: Sequence[MemoryRecord], **kw: bool) -> np.ndarray:
            if secret in {r.content for r in records} and not removed:
                if removal == "erase":
                    removed.extend(erase(store, "u-1", ids=["u-1-1"])["erased"])
                else:
                    store.delete_many(["u-1-1"])
                    removed.append("u-1-1")
            return real(records, **kw)

        monkeypatch.setattr(mem.cache, "get_or_embed", racing)
        assert mem.warm("u-1", NS.format("u-1")) == (2, 2)
        assert removed == ["u-1-1"]
        assert rows(store, secret) == []
        assert len(rows(store, FACTS["u-1"][0])) == 2


def test_warm_repairs_a_vector_missing_beside_its_codes(old_store: Path) -> None:
    warm(old_store)
    text = FACTS["u-2"][0]
    with SqliteStore(old_store) as store:
        q = "DELETE FROM embeddings WHERE content_sha256 = ? AND model_id NOT LIKE '%#tokens'"
        store.connection.execute(q, (content_sha256(text),))
        assert len(rows(store, text)) == 1
    assert warm(old_store)["embedded"] == 1
    with SqliteStore(old_store) as store:
        assert len(rows(store, text)) == 2


def test_warm_names_an_actor_with_no_memories(old_store: Path) -> None:
    res = CliRunner().invoke(
        app, ["warm", "--store", f"sqlite:///{old_store}", "--actor", "nobody"]
    )
    assert res.exit_code == 0 and "actor 'nobody' has no memories" in res.output


def test_warm_leaves_a_text_of_exactly_one_window_alone_the_second_time(home: Path) -> None:
    """Codes of exactly one full window are taken for a long text's codes from before
    codes covered every window, and computed again: unless the text fits one window, or
    every warm would embed it again."""
    one_window = " ".join(["word"] * 254)  # 254 pieces + [CLS] + [SEP]: one full window
    db = home / "memlife.db"
    with SqliteStore(db) as store:
        store.put_many([rec("w", "u-1", one_window), rec("y", "u-1", FACTS["u-1"][0])])
    assert warm(db)["embedded"] == 2
    with SqliteStore(db) as store:
        q = "SELECT dim FROM embeddings WHERE content_sha256 = ? AND model_id LIKE '%#tokens'"
        assert store.connection.execute(q, (content_sha256(one_window),)).fetchone() == (254,)
    assert warm(db)["embedded"] == 0
