"""An import worker's write: a batch of rows, kept as one Arrow table since its parse, bound
as it is by ADBC's SQLite driver (``adbc_driver_sqlite``) in one transaction.

Why: binding a 26-column row from Python costs about as much as the B-tree work of storing
it (``SqliteStore.insert_rows``: ~17.5 us of CPU a row; the driver binds the table's
columns in C: ~11 us), and building the Python row costs as much again (BENCHMARKS.md,
"Eighth pass: the worker's write binds Arrow").

The driver carries its own copy of the SQLite library. Two copies in one process do not
see each other's POSIX locks, and closing a descriptor in one drops the other's locks, so
this writer is the only connection its process holds to the file while it is open. What
the plain write cannot take goes through ``SqliteStore.insert_rows``, the judge on every
other path, with the ADBC connection closed meanwhile:
- a batch actor has tombstones, or a row names sources: each row's content and sources
  are checked there, row by row (what is plain is read inside the write transaction, so
  an erasure cannot slip in before the write);
- the write fails (an id is stored already, the primary key refuses it): undone whole,
  then the store looks the ids up and says which are ID_EXISTS or unchanged.
Either way the rows stored and the report are the row path's (``tests/unit/
test_parallel_import.py`` holds them equal, values and SQLite types).
"""

from __future__ import annotations

import contextlib
import os
import urllib.parse
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from memlife import faults
from memlife.import_table import table_rows
from memlife.import_write import Flushed, row_superseded, write_batch
from memlife.model import Status
from memlife.sql_in import in_chunks
from memlife.stores.sqlite import COLUMNS, SqliteStore, row_to_record

_BUSY_MS = 30_000  # as SqliteStore's busy_timeout
# in the provenance JSON every path writes (compact, model key order); a row without it
# names sources, or is written some other way: either way the store checks it
_NO_SOURCES = '"supersedes":[]'


class IngestWriter:
    """Writes batches of store rows (``import_table.ROW_SCHEMA``) into the SQLite file at
    ``path``; one per worker process."""

    def __init__(self, path: Path):
        self.path = Path(path).resolve()
        self._con: Any = None
        self._cur: Any = None
        self._open()

    def _open(self) -> None:
        import adbc_driver_sqlite.dbapi as adbc  # only a worker process loads the driver

        # the path's own bytes, percent-encoded: a name that is not UTF-8 ("caf\xe9.db") is
        # a str with surrogates here, which quote() alone cannot encode
        uri = "file:" + urllib.parse.quote(os.fsencode(self.path))
        self._con = adbc.connect(uri, autocommit=True)  # transactions are ours (BEGIN)
        self._cur = self._con.cursor()
        # as SqliteStore's connections, and the WAL folded after the turn (import_turns)
        for pragma in (f"busy_timeout={_BUSY_MS}", "synchronous=NORMAL", "secure_delete=ON",
                       "wal_autocheckpoint=0"):  # fmt: skip
            self._query(f"PRAGMA {pragma}")

    def _query(self, sql: str) -> list[tuple[Any, ...]]:
        self._cur.execute(sql)
        return list(self._cur.fetchall())  # [] for a statement without rows (BEGIN)

    def _rollback(self) -> None:
        """Undo the open transaction (after some errors SQLite has undone it already)."""
        from adbc_driver_manager import DatabaseError

        with contextlib.suppress(DatabaseError):  # "no transaction is active"
            self._query("ROLLBACK")

    def write(self, batch: pa.Table) -> Flushed:
        """Store the batch's rows in one transaction, in id order (random ids, uuids, then
        sweep the primary key's B-tree once); say what the write found."""
        self._query("BEGIN IMMEDIATE")
        try:
            if self._plain(batch):
                ordered = batch.take(pc.sort_indices(batch, [("id", "ascending")]))
                self._cur.adbc_ingest("records", ordered.select(list(COLUMNS)), mode="append")
                faults.checkpoint("import_commit")  # killed here: the transaction never was
                self._query("COMMIT")
                return _stored(batch)
            self._query("ROLLBACK")
        except Exception as exc:
            self._rollback()
            if not _refused(exc):
                raise
        return self._through_store(batch)

    def _plain(self, batch: pa.Table) -> bool:
        """No row of the batch needs insert_rows' tombstone check: the store holds none,
        or none of the batch's actors has one and no row names sources (insert_rows asks
        the same). Read inside the write transaction: no erasure slips in before the
        write."""
        if not self._query("SELECT 1 FROM tombstones LIMIT 1"):
            return True
        if not pc.all(pc.match_substring(batch.column("provenance"), _NO_SOURCES)).as_py():
            return False
        actors = pc.unique(batch.column("actor_id")).to_pylist()
        for marks, chunk in in_chunks(actors):
            self._cur.execute(f"SELECT 1 FROM tombstones WHERE actor_id IN ({marks}) LIMIT 1",
                              tuple(chunk))  # fmt: skip
            if self._cur.fetchall():
                return False
        return True

    def _through_store(self, batch: pa.Table) -> Flushed:
        """The batch through ``SqliteStore.insert_rows``, this connection closed meanwhile."""
        self.close()
        try:
            with SqliteStore(self.path) as store:
                store.connection.execute("PRAGMA wal_autocheckpoint=0")
                items = [(n, row[0], row) for n, row, _ in table_rows(batch)]
                return write_batch(
                    store, items, store.insert_rows, row_to_record, row_superseded, False
                )
        finally:
            self._open()

    def fold_wal(self) -> None:
        """A PASSIVE checkpoint: never blocks another writer; the WAL restarts once one
        has caught up."""
        self._query("PRAGMA wal_checkpoint(PASSIVE)")

    def close(self) -> None:
        if self._con is not None:
            self._cur.close()
            self._con.close()
            self._con = self._cur = None


def _refused(exc: Exception) -> bool:
    """A write the store's own path should judge: the driver's database errors (a stored
    id, a constraint), not an injected fault or a bug of ours."""
    from adbc_driver_manager import DatabaseError

    return isinstance(exc, DatabaseError)


def _stored(batch: pa.Table) -> Flushed:
    """Every row of the batch stored: the superseded ones are named, in file order."""
    superseded = pc.equal(batch.column("status"), Status.superseded.value)
    marked = batch.filter(superseded)
    return Flushed(
        imported=batch.num_rows,
        superseded=list(
            zip(marked.column("line").to_pylist(), marked.column("id").to_pylist(), strict=True)
        ),
    )
