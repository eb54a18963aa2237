"""The derived cache (memlife/derived.py): a kept result is exactly the recomputed one, any
changed input misses, and erasure leaves nothing of a shard behind."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import memlife.inferred.cached as cached
from memlife.apply.stage_cache import StageCache
from memlife.derived import DerivedCache, derived_for, forget_for
from memlife.embed_cache import EmbeddingCache
from memlife.model import MemoryRecord, MemoryType, PlanView, plan_view
from memlife.plan import Action, Decision
from memlife.policy import Policy, load_policy
from memlife.stores.sqlite import SqliteStore
from tests.e2e.test_dry_run_fast_paths import WordHashEmbedder

T0 = datetime(2026, 5, 1, tzinfo=UTC)
SHARD = ("u-1", "/users/u-1/events")


def rec(rid: str, content: str, hours: float) -> MemoryRecord:
    return MemoryRecord(id=rid, actor_id=SHARD[0], namespace=SHARD[1], content=content,
                        memory_type=MemoryType.episodic, created_at=T0 + timedelta(hours=hours))  # fmt: skip


TEXTS = [
    "Went hiking on the ridge trail with Sam.",
    "Went hiking on the ridge trail with Sam!",
    "Hiked the ridge trail again with Sam.",
    "Cooked a mushroom risotto for dinner.",
    "Cooked mushroom risotto for dinner tonight.",
    "Now drinks only green tea, gave up coffee.",
    "Drinks coffee every morning.",
]


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    s = SqliteStore(tmp_path / "m.db")
    s.put_many([rec(f"e-{i}", t, i) for i, t in enumerate(TEXTS)])
    return s


@pytest.fixture
def embeddings(tmp_path: Path) -> EmbeddingCache:
    return EmbeddingCache(WordHashEmbedder(), path=tmp_path / "embeddings.db")  # type: ignore[arg-type]


def views_of(store: SqliteStore) -> list[PlanView]:
    return [plan_view(r) for r in store.get_many([f"e-{i}" for i in range(len(TEXTS))]).values()]


def counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = cached.infer_subjects

    def spy(*a, **kw):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(cached, "infer_subjects", spy)
    return calls


def test_cache_round_trip_digest_and_reopen(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "d.db", isolation_level=None)
    d = DerivedCache(conn, __import__("threading").RLock())
    d.put(SHARD, "k", "abc", {"x": [1, 2]})
    assert d.get(SHARD, "k", "abc") == {"x": [1, 2]}  # pending, before any flush
    assert d.get(SHARD, "k", "abd") is None  # another digest: a miss
    d.flush()
    again = DerivedCache(sqlite3.connect(tmp_path / "d.db"), __import__("threading").RLock())
    assert again.get(SHARD, "k", "abc") == {"x": [1, 2]}
    assert again.get(("u-2", SHARD[1]), "k", "abc") is None  # shards never share rows
    again.put(("u-2", SHARD[1]), "k", "abc", 1)
    again.flush()
    assert again.forget_shards([SHARD]) == 1
    assert again.get(SHARD, "k", "abc") is None and len(again) == 1


def test_forget_creates_no_table(tmp_path: Path) -> None:
    cache = EmbeddingCache(WordHashEmbedder(), path=tmp_path / "e.db")  # type: ignore[arg-type]
    assert forget_for(cache, [SHARD]) == 0
    q = "SELECT name FROM sqlite_master WHERE name='derived'"
    assert cache.connection is not None and cache.connection.execute(q).fetchone() is None


def test_inference_hit_equals_recompute(
    store: SqliteStore, embeddings: EmbeddingCache, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    calls = counting(monkeypatch)
    policy = load_policy()
    views = views_of(store)
    read: dict[str, MemoryRecord] = {}
    first = cached.infer_shard(store, SHARD, views, {}, policy, embeddings, read)
    assert calls == [1] and len(read) == len(TEXTS)
    assert first.statements and len(set(first.subjects.values())) >= 2  # something inferred
    read.clear()
    second = cached.infer_shard(store, SHARD, list(reversed(views)), {}, policy, embeddings, read)
    assert calls == [1] and read == {}  # answered from the cache: nothing read, nothing inferred
    assert second == first
    # kept in the file: a new run (a new cache object on the same file) hits as well
    derived = derived_for(embeddings)
    assert derived is not None
    derived.flush()
    other = EmbeddingCache(WordHashEmbedder(), path=tmp_path / "embeddings.db")  # type: ignore[arg-type]
    assert cached.infer_shard(store, SHARD, views, {}, policy, other) == first and calls == [1]


@pytest.mark.parametrize("change", ["content", "created", "known", "policy", "model", "new"])
def test_changed_input_misses_and_recomputes(
    store: SqliteStore, embeddings: EmbeddingCache, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path, change: str,
) -> None:  # fmt: skip
    calls = counting(monkeypatch)
    policy, known = load_policy(), {}
    cached.infer_shard(store, SHARD, views_of(store), known, policy, embeddings)
    derived = derived_for(embeddings)
    assert derived is not None
    derived.flush()
    if change == "content":
        store.put_many([rec("e-3", "Baked sourdough bread for dinner.", 3)])
    elif change == "created":
        store.put_many([rec("e-3", TEXTS[3], 3.5)])
    elif change == "new":
        store.put_many([rec("e-9", "Went hiking on the ridge trail with Sam again.", 9)])
    elif change == "known":
        known = {"e-0": "hiking ridge trail ~abc123"}
    elif change == "policy":
        policy = Policy.model_validate(
            {
                **load_policy().model_dump(),
                "inference": {**load_policy().inference.model_dump(), "topic_cosine": 0.6},
            }  # fmt: skip
        )
    elif change == "model":  # the same file, another embedding model

        class Other(WordHashEmbedder):
            model_id = "word-hash-v2"

        embeddings = EmbeddingCache(Other(), path=tmp_path / "embeddings.db")  # type: ignore[arg-type]
    views = [plan_view(r) for r in store.get_many(
        [f"e-{i}" for i in (*range(len(TEXTS)), 9)]).values()]  # fmt: skip
    got = cached.infer_shard(store, SHARD, views, known, policy, embeddings)
    assert calls == [1, 1]  # a miss: computed again
    fresh = cached._infer(store, views, known, policy, embeddings, None, 4096)
    assert got == fresh


def test_every_input_is_in_the_digest() -> None:
    base = plan_view(rec("e-1", TEXTS[0], 1))
    policy = load_policy()
    d0 = cached.inference_digest([base], {}, policy, "m")
    changed = [
        cached.inference_digest([base._replace(id="e-2")], {}, policy, "m"),
        cached.inference_digest([base._replace(content_sha256="0" * 64)], {}, policy, "m"),
        cached.inference_digest([base._replace(norm_sha256="0" * 64)], {}, policy, "m"),
        cached.inference_digest([base._replace(negated=not base.negated)], {}, policy, "m"),
        cached.inference_digest([base._replace(created=base.created + 1e-6)], {}, policy, "m"),
        cached.inference_digest([base], {"e-1": "k"}, policy, "m"),
        cached.inference_digest([base], {"e-1": "k2"}, policy, "m"),
        cached.inference_digest([base], {}, policy, "m2"),
        cached.inference_digest(
            [base], {}, policy.model_copy(update={"version": policy.version + "x"}), "m"
        ),
    ]
    assert len({d0, *changed}) == len(changed) + 1
    # fields inference never reads do not split the cache (the ledger moves them nightly)
    assert cached.inference_digest([base._replace(access_count=7)], {}, policy, "m") == d0
    # ids cannot be made to read as other fields: length-prefixed
    a = base._replace(id="e\x1fx")
    assert cached.inference_digest([a], {}, policy, "m") != d0


def test_stage_key_reads_every_field_staging_reads() -> None:
    v = plan_view(rec("e-1", TEXTS[0], 1))._replace(subject="hiking", owner="t")
    w = plan_view(rec("e-2", TEXTS[1], 2))._replace(subject="hiking", owner="t")

    def key(views: dict[str, PlanView], survivor: str | None = None) -> str | None:
        cache = StageCache.__new__(StageCache)
        cache.context, cache.views = "ctx", views
        members = [Decision(i, SHARD[0], SHARD[1], Action.consolidate_candidate, [],
                            survivor=survivor) for i in ("e-1", "e-2")]  # fmt: skip
        return cache.key("g", members)

    k0 = key({"e-1": v, "e-2": w})
    fields = dict(
        memory_type=MemoryType.semantic, subject="other", source="agent_inferred",
        created=v.created + 1e-6, last_verified=1.0, retention_class="legal_hold",
        status="superseded", content_sha256="1" * 64, norm_sha256="2" * 64, negated=True,
    )  # fmt: skip
    for name, value in fields.items():
        assert key({"e-1": v._replace(**{name: value}), "e-2": w}) != k0, name
    # what staging never reads when it only counts: access (the ledger moves it nightly),
    # owner, expiry, status time, confidence
    unread = dict(access_count=9, last_accessed=5.0, owner="x", expires=9.0,
                  status_changed=4.0, confidence=0.1)  # fmt: skip
    for name, value in unread.items():
        assert key({"e-1": v._replace(**{name: value}), "e-2": w}) == k0, name
    assert key({"e-1": v, "e-2": w}, survivor="e-2") != k0
    assert key({"e-1": v}) is None  # a member without a view: never kept


def test_model_id_without_loading_the_model_is_the_loaded_ones(tmp_path: Path) -> None:
    import memlife.embed

    cache = EmbeddingCache(path=tmp_path / "e.db")
    unloaded = cache.model_id
    assert cache._embedder is None  # learnt without loading the model
    assert unloaded == memlife.embed.default_embedder().model_id
    assert EmbeddingCache(WordHashEmbedder(), path=tmp_path / "w.db").model_id == "word-hash-v1"  # type: ignore[arg-type]


@pytest.mark.parametrize("order", ["sorted", "shuffled", "reversed"])
def test_read_ahead_answers_every_shard_as_one_query_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: str
) -> None:
    import random
    import threading

    import memlife.derived as derived_mod

    monkeypatch.setattr(derived_mod, "READ_AHEAD", 3)  # a read-ahead boundary every few shards
    conn = sqlite3.connect(tmp_path / "d.db", isolation_level=None)
    writer = DerivedCache(conn, threading.RLock())
    rng = random.Random(5)
    shards = [(f"u-{a:02d}", f"/users/u-{a:02d}/n{n}") for a in range(12) for n in range(3)]
    kept: dict[tuple[str, str, str], str] = {}
    for sh in shards:
        for kind in derived_mod.KINDS:
            if rng.random() < 0.5:  # gaps: shards with some kinds, none, or all
                kept[(*sh, kind)] = f"d-{sh}-{kind}"
                writer.put(sh, kind, kept[(*sh, kind)], [sh[0], kind])
    writer.flush()
    reader = DerivedCache(sqlite3.connect(tmp_path / "d.db"), threading.RLock())
    asked = list(shards)
    if order == "shuffled":
        rng.shuffle(asked)
    elif order == "reversed":
        asked.reverse()
    for sh in asked:
        for kind in derived_mod.KINDS:
            want = kept.get((*sh, kind))
            got = reader.get(sh, kind, want or "none")
            assert got == ([sh[0], kind] if want else None), (sh, kind)


def test_known_keys_change_no_answer(
    store: SqliteStore, embeddings: EmbeddingCache, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    # An apply run stores found.new as known keys; the next night asks with known | new.
    # The row kept for that question must be what recomputing it gives.
    policy = load_policy()
    views = views_of(store)
    some = {views[0].id: "kept key ~abc123"}  # a key a person's earlier night left
    first = cached.infer_shard(store, SHARD, views, some, policy, embeddings, stores_new=True)
    assert first.new  # something new to store, so the question changes
    known = {**some, **first.new}
    calls = counting(monkeypatch)
    hit = cached.infer_shard(store, SHARD, views, known, policy, embeddings)
    assert calls == []  # the night after: answered from the cache
    plain = tmp_path / "plain.db"
    recomputed = cached.infer_shard(
        store, SHARD, views, known, policy,
        EmbeddingCache(WordHashEmbedder(), path=plain),  # type: ignore[arg-type]
    )  # fmt: skip
    assert calls == [1] and hit == recomputed and recomputed.new == {}
    assert hit.subjects == first.subjects and hit.statements == first.statements
    assert hit.updates == first.updates
