"""Session 48 (audit 48m): a cached vector that is not finite (memlife/embed_cache.py::_lookup), an
infinity rather than audit 48f's NaN. The real MiniLM embedder, the home's SQLite store
and its embedding cache, the online library as a new process opens it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from memlife.embed_cache import TOKENS
from memlife.model import content_sha256
from tests.unit.test_caches_session48 import CAT, NS, PAINTS, fresh, remembered  # noqa: F401


def test_a_record_whose_cached_vector_is_infinite_is_still_recalled(home: Path, fresh) -> None:  # noqa: F811
    """Weak test (mutant: `np.isfinite(vector).all()` read as `not np.isnan(vector).any()`).
    The adversary rewrites the cat's cached vector as infinities of the right length (no
    NaN in it). Must hold: the row is damaged, so it is embedded again, and a recall for
    the cat still finds it first."""
    db = remembered(home, CAT, PAINTS)
    con = sqlite3.connect(db, isolation_level=None)
    try:
        sha, other = content_sha256(CAT), "%" + TOKENS
        (dim,) = con.execute(
            "SELECT dim FROM embeddings WHERE content_sha256=? AND model_id NOT LIKE ?",
            (sha, other),
        ).fetchone()
        inf = np.full(dim, np.inf, np.float32).tobytes()
        con.execute(
            "UPDATE embeddings SET vector=? WHERE content_sha256=? AND model_id NOT LIKE ?",
            (inf, sha, other),
        )
    finally:
        con.close()
    hits = fresh().recall("u-1", "grey cat Maria", namespace=NS)
    assert [h.record.content for h in hits][:1] == [CAT]
