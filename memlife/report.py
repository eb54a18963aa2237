"""The proposed-actions report of a run: JSONL and Parquet, one row per record, no content.

Rows are ``{"id", "actor_id", "namespace", "action", "reasons", "score"}``. Both files
are written incrementally (a Parquet row group per batch) so a 1M-record run never
holds the report in memory. Thread-safe: Prefect may run shard batches concurrently.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from memlife.plan import Decision

SCHEMA = pa.schema([
    ("id", pa.string()),
    ("actor_id", pa.string()),
    ("namespace", pa.string()),
    ("action", pa.string()),
    ("reasons", pa.list_(pa.string())),
    ("score", pa.float64()),
])  # fmt: skip


ROW_GROUP = 50_000


class ReportWriter:
    def __init__(self, folder: str | Path, stem: str = "proposed-actions"):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.jsonl_path = self.folder / f"{stem}.jsonl"
        self.parquet_path = self.folder / f"{stem}.parquet"
        self._jsonl = self.jsonl_path.open("w", encoding="utf-8")
        self._parquet = pq.ParquetWriter(self.parquet_path, SCHEMA, compression="zstd")
        self._lock = threading.Lock()
        self._pending: list[dict] = []  # Parquet rows buffered into large row groups
        self.rows = 0

    def write(self, decisions: Iterable[Decision]) -> None:
        rows = [d.report_row() for d in decisions]
        if not rows:
            return
        text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)
        with self._lock:
            self._jsonl.write(text)
            self._pending += rows
            self.rows += len(rows)
            if len(self._pending) >= ROW_GROUP:
                self._flush()

    def _flush(self) -> None:
        if self._pending:
            self._parquet.write_table(pa.Table.from_pylist(self._pending, schema=SCHEMA))
            self._pending = []

    def close(self) -> None:
        with self._lock:
            self._flush()
            self._jsonl.close()
            self._parquet.close()
