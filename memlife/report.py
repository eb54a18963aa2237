"""The proposed-actions report of a run: JSONL and Parquet, one row per record, no content.

Rows are ``{"id", "actor_id", "namespace", "action", "reasons", "score"}``. Both files
are written incrementally (a Parquet row group per batch) so a 1M-record run never
holds the report in memory. Thread-safe: Prefect may run shard batches concurrently.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterable
from json.encoder import encode_basestring_ascii as _q  # C-accelerated JSON string quoting
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
        self._pending: list[Decision] = []  # Parquet rows buffered into large row groups
        self.rows = 0

    def write(self, decisions: Iterable[Decision]) -> None:
        decisions = list(decisions)
        if not decisions:
            return
        lines = []
        # Within a shard the actor and namespace repeat, and reason lists come from a
        # small set: encode each once. Reason codes and actions are plain ASCII.
        head = f',"actor_id":{_q(decisions[0].actor_id)},"namespace":{_q(decisions[0].namespace)}'
        same_shard = all(d.namespace == decisions[0].namespace and d.actor_id == decisions[0].actor_id
                         for d in decisions)  # fmt: skip
        tails: dict[tuple, str] = {}
        for d in decisions:
            key = (d.action, *d.reasons)
            tail = tails.get(key)
            if tail is None:
                tail = tails[key] = (f',"action":"{d.action}","reasons":['
                                     + ",".join(f'"{r}"' for r in d.reasons) + '],"score":')  # fmt: skip
            mid = head if same_shard else f',"actor_id":{_q(d.actor_id)},"namespace":{_q(d.namespace)}'
            score = "null" if d.score is None else repr(round(d.score, 6))
            lines.append(f'{{"id":{_q(d.id)}{mid}{tail}{score}}}\n')
        with self._lock:
            self._jsonl.write("".join(lines))
            self._pending += decisions
            self.rows += len(decisions)
            if len(self._pending) >= ROW_GROUP:
                self._flush()

    def _flush(self) -> None:
        if self._pending:
            p = self._pending
            table = pa.table(
                {
                    "id": [d.id for d in p],
                    "actor_id": [d.actor_id for d in p],
                    "namespace": [d.namespace for d in p],
                    "action": [str(d.action) for d in p],
                    "reasons": [[str(r) for r in d.reasons] for d in p],
                    "score": [None if d.score is None else round(d.score, 6) for d in p],
                },
                schema=SCHEMA,
            )
            self._parquet.write_table(table)
            self._pending = []

    def merge_parts(self, parts: Path) -> int:
        """Fold report parts written by other processes into this report, then drop them."""
        if not parts.is_dir():
            return 0
        merged = 0
        with self._lock:
            self._flush()
            for part in sorted(p for p in parts.iterdir() if p.is_dir()):
                jsonl, parquet = part / self.jsonl_path.name, part / self.parquet_path.name
                if jsonl.exists():
                    with jsonl.open(encoding="utf-8") as fh:
                        shutil.copyfileobj(fh, self._jsonl)
                if parquet.exists():
                    table = pq.read_table(parquet, schema=SCHEMA)
                    self._parquet.write_table(table)
                    merged += table.num_rows
            self.rows += merged
            shutil.rmtree(parts)
        return merged

    def close(self) -> None:
        with self._lock:
            self._flush()
            self._jsonl.close()
            self._parquet.close()
