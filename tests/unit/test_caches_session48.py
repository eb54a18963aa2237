"""Audit 48f: the caches and derived tables that decisions read, against a damaged row.

A cached vector is used to rank (recall), to find a near duplicate (``remember``) and to
group at night. A row of the right length passes the cache's one check (dim and byte
count) whatever its floats say: a NaN vector (a torn write, a bit flip in the exponent,
an editor of the file) was served as it is. Real SQLite store and the bundled MiniLM;
moto DynamoDB for the state table's cache.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memlife.embed_cache import TOKENS
from memlife.model import content_sha256
from tests.support.aws_state import aws_state
from tests.unit.test_embed_cache import CountingEmbedder

NS = "/users/u-1/facts"
CAT = "Caroline adopted a grey cat named Maria."
PAINTS = "Melanie paints sunsets by the lake every weekend."


def poison(db: Path, text: str) -> None:
    """The adversary rewrites ``text``'s cached vector as NaNs of the right length."""
    con = sqlite3.connect(db, isolation_level=None)
    try:
        (dim,) = con.execute(
            "SELECT dim FROM embeddings WHERE content_sha256=? AND model_id NOT LIKE ?",
            (content_sha256(text), "%" + TOKENS),
        ).fetchone()
        con.execute(
            "UPDATE embeddings SET vector=? WHERE content_sha256=? AND model_id NOT LIKE ?",
            (np.full(dim, np.nan, np.float32).tobytes(), content_sha256(text), "%" + TOKENS),
        )
    finally:
        con.close()


def remembered(home: Path, *facts: str) -> Path:
    """The facts remembered (vectors stored in the store's file); the file's path."""
    from memlife.ledger import AccessLedger
    from memlife.online.memory import LongTermMemory
    from memlife.stores.sqlite import SqliteStore

    with SqliteStore(home / "memlife.db") as store:
        m = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
        for f in facts:
            assert m.remember("u-1", NS, None, f).created
        m.close()
    return home / "memlife.db"


@pytest.fixture()
def fresh(home: Path) -> Iterator[object]:
    """A new process's long-term memory over the home's store (its shards not loaded)."""
    from memlife.ledger import AccessLedger
    from memlife.online.memory import LongTermMemory
    from memlife.stores.sqlite import SqliteStore

    def open_() -> LongTermMemory:
        store = SqliteStore(home / "memlife.db")
        opened.append((m := LongTermMemory(store, ledger=AccessLedger(home / "ledger")), store))
        return m

    opened: list[tuple[LongTermMemory, SqliteStore]] = []
    yield open_
    for m, store in opened:
        m.close()
        store.close()


def test_a_record_whose_cached_vector_is_nan_is_still_recalled(home: Path, fresh) -> None:
    """The adversary overwrites one record's cached vector with NaNs of the right length.
    Must hold: a recall that finds the record on a sound cache still finds it (the row is
    damaged, so it is embedded again); it was ranked on NaN and never returned."""
    db = remembered(home, CAT, PAINTS)
    hits = fresh().recall("u-1", "grey cat Maria", namespace=NS)
    assert [h.record.content for h in hits][:1] == [CAT]  # on a sound cache
    poison(db, CAT)
    hits = fresh().recall("u-1", "grey cat Maria", namespace=NS)
    assert [h.record.content for h in hits][:1] == [CAT]


def test_one_nan_vector_does_not_blind_the_shards_duplicate_check(home: Path, fresh) -> None:
    """The adversary damages the cached vector of one record (the cat), then the agent
    remembers a rewording of ANOTHER record (the painting: same words, one article more).
    Must hold: the rewording refreshes the painting record, as it does on a sound cache;
    the NaN row won numpy's argmax in the nearest-neighbour search and the shard had "no
    near duplicate" at all: a second copy of the fact was stored."""
    again = "Melanie paints the sunsets by the lake every weekend."
    db = remembered(home, CAT, PAINTS)
    poison(db, CAT)
    result = fresh().remember("u-1", NS, None, again)
    assert not result.created and result.refreshed_duplicate_of is not None


def test_a_nan_vector_in_the_state_tables_cache_is_embedded_again() -> None:
    """On DynamoDB state (moto) a worker finds another's vectors in the state table. The
    adversary rewrites one item's vector as NaNs of the right length. Must hold: the next
    worker gets the text's real vector back (embedded again), never the NaNs."""
    from memlife.state.dynamodb import key
    from memlife.state.embeddings import DynamoEmbeddingCache

    with aws_state("inprocess") as (_, state):
        emb = CountingEmbedder()
        want = DynamoEmbeddingCache(state, emb).get_or_embed_texts(["alpha"])
        nan = np.full(emb.dim, np.nan, np.float32).tobytes()
        item = {**key(f"emb#{content_sha256('alpha')}", emb.model_id)}
        state.batch_write(puts=[{**item, "dim": {"N": str(emb.dim)}, "vector": {"B": nan}}])
        got = DynamoEmbeddingCache(state, CountingEmbedder()).get_or_embed_texts(["alpha"])
        np.testing.assert_array_equal(got, want)


def _derived_cleared(home: Path) -> None:
    con = sqlite3.connect(home / "embeddings.db", isolation_level=None)
    try:
        con.execute("DELETE FROM derived")
    finally:
        con.close()


def test_a_dry_run_answered_from_the_stage_cache_reports_the_kept_apart_rejection(
    home: Path,
) -> None:
    """Weak test (audit 48f): the stage cache's replay of a group's rejections (the shard's
    sum, then one group beside a changed one) was held by no test. The operator dry-runs a
    night twice; offline the extractive rule keeps "drinks coffee" / "also drinks green
    tea" apart (a KEEP_APART rejection); the shard's other group ("city") changes before
    the third run. Must hold: every run reports the rejection the first computed, and the
    third equals a run on a cleared cache."""
    from memlife.stores.sqlite import SqliteStore
    from tests.unit.test_counts_session47 import ROLLOUT, night, rec, seed

    seed(home, [rec("c", ROLLOUT, "The user drinks coffee.", age=30, subject="drinks"),
                rec("d", ROLLOUT, "The user also drinks green tea.", age=10, subject="drinks"),
                rec("b", ROLLOUT, "The user lives in Berlin.", age=40, subject="city"),
                rec("p", ROLLOUT, "The user lives in Paris.", age=5, subject="city")])  # fmt: skip
    first = night("--dry-run")
    assert first["model"]["rejections"] == {"KEEP_APART": 1}
    assert night("--dry-run")["model"] == first["model"]  # the shard's kept sum
    with SqliteStore(home / "memlife.db") as s:  # the city group changes, drinks does not
        s.put_many([rec("p", ROLLOUT, "The user lives in Rome.", age=5, subject="city")])
    third = night("--dry-run")  # drinks replayed on its own
    _derived_cleared(home)
    assert third["model"] == first["model"] == night("--dry-run")["model"]
