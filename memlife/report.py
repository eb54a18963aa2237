"""The proposed-actions report of a run: JSONL and Parquet, one row per record, no content.

Rows are ``{"id", "actor_id", "namespace", "action", "reasons", "score"}``. During the
run only the JSONL is appended (one cheap line per record); at close, Arrow's streaming
JSON reader turns it into Parquet in C++, batch by batch, so a 1M-record run never holds
the report in memory and pays no Python cost per Parquet row. Parts written by other
processes (parallel dry runs, child flows) are appended before that. Thread-safe.
"""

from __future__ import annotations

import io
import json
import shutil
import threading
from collections.abc import Collection, Iterable
from json.encoder import encode_basestring_ascii as _q  # C-accelerated JSON string quoting
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pj
import pyarrow.parquet as pq

from memlife.faults import checkpoint
from memlife.plan import Decision

SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("actor_id", pa.string()),
        ("namespace", pa.string()),
        ("action", pa.string()),
        ("reasons", pa.list_(pa.string())),
        ("score", pa.float64()),
    ]
)

CHUNK = 4 << 20  # JSONL bytes parsed at a time when converting to Parquet


def encode(decisions: list[Decision]) -> str:
    """JSONL lines for decisions; actor/namespace and reason lists encoded once each (hot:
    once per record of the store)."""
    lines: list[str] = []
    append = lines.append
    tails: dict[tuple[str, ...], str] = {}
    heads: dict[tuple[str, str], str] = {}
    last_scope: tuple[str, str] | None = None
    head = ""
    for d in decisions:
        scope = (d.actor_id, d.namespace)
        if scope != last_scope:  # a shard's decisions share one scope
            last_scope = scope
            head = heads.get(scope) or heads.setdefault(
                scope, f',"actor_id":{_q(d.actor_id)},"namespace":{_q(d.namespace)}'
            )
        key = (d.action, *d.reasons)
        tail = tails.get(key)
        if tail is None:  # reason codes and actions are plain ASCII
            tail = tails[key] = (
                f',"action":"{d.action}","reasons":['
                + ",".join(f'"{r}"' for r in d.reasons)
                + '],"score":'
            )
        score = d.score
        append(
            f'{{"id":{_q(d.id)}{head}{tail}{"null" if score is None else repr(round(score, 6))}}}\n'
        )
    return "".join(lines)


class ReportWriter:
    def __init__(self, folder: str | Path, stem: str = "proposed-actions"):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.jsonl_path = self.folder / f"{stem}.jsonl"
        self.parquet_path = self.folder / f"{stem}.parquet"
        self._jsonl = self.jsonl_path.open("w", encoding="utf-8")
        self._lock = threading.Lock()
        self.rows = 0
        self.closed = False
        self._shards: set[tuple[str, str]] = set()

    def write(self, decisions: Iterable[Decision]) -> None:
        """One shard's decisions. Writing a shard twice (a retried batch) keeps the first."""
        decisions = list(decisions)
        if not decisions:
            return
        shard = (decisions[0].actor_id, decisions[0].namespace)
        text = encode(decisions)
        with self._lock:
            if shard in self._shards:
                return
            self._shards.add(shard)
            self._jsonl.write(text)
            self.rows += len(decisions)
        checkpoint("after_shard_reported")

    def merge_parts(self, parts: Path) -> int:
        """Append report parts written by other processes to this report, then drop them."""
        if not parts.is_dir():
            return 0
        merged = 0
        with self._lock:
            self._jsonl.flush()
            out = self._jsonl.buffer
            for part in sorted(p for p in parts.iterdir() if p.is_dir()):
                jsonl = part / self.jsonl_path.name
                if jsonl.exists():
                    with jsonl.open("rb") as fh:
                        while chunk := fh.read(1 << 20):
                            out.write(chunk)
                            merged += chunk.count(b"\n")
            out.flush()
            self.rows += merged
            shutil.rmtree(parts)
        return merged

    def drop_shards(self, shards: Collection[tuple[str, str]]) -> int:
        """Take out the rows of these (actor, namespace) shards: a batch that failed as a
        whole after some of its shards were written (a crash, throttling past its retries)
        is counted as failed shards, none of its records planned, so the report must not
        propose actions for them. Rare (only when a run failed shards): one pass, streamed."""
        if not shards or self.closed:
            return 0
        wanted = set(shards)
        with self._lock:
            self._jsonl.close()
            kept = self.jsonl_path.with_name(self.jsonl_path.name + ".kept")
            dropped = 0
            with self.jsonl_path.open("rb") as src, kept.open("wb") as dst:
                for line in src:
                    row = json.loads(line)
                    if (row["actor_id"], row["namespace"]) in wanted:
                        dropped += 1
                    else:
                        dst.write(line)
            kept.replace(self.jsonl_path)
            self._jsonl = self.jsonl_path.open("a", encoding="utf-8")
            self.rows -= dropped
            self._shards -= wanted
        return dropped

    def close(self, parquet: bool = True) -> None:
        """``parquet=False``: a part another process merges (merge_parts reads its JSONL)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._jsonl.close()
            if parquet:
                jsonl_to_parquet(self.jsonl_path, self.parquet_path)


def jsonl_to_parquet(src: Path, dst: Path, chunk_bytes: int = CHUNK) -> int:
    """Convert a report's JSONL into Parquet chunk by chunk (C++ parsing, bounded memory).

    Chunks end at a line break; each becomes one row group. Arrow's own streaming reader
    reads too far ahead at 1M rows (hundreds of MB), hence the explicit chunking.
    """
    rows = 0
    parse = pj.ParseOptions(explicit_schema=SCHEMA, unexpected_field_behavior="error")
    # one thread: the same CPU time here, and ~30 MB less peak memory than the thread pool
    read = pj.ReadOptions(use_threads=False, block_size=1 << 20)
    with pq.ParquetWriter(dst, SCHEMA, compression="zstd") as writer, src.open("rb") as fh:
        rest = b""
        while chunk := fh.read(chunk_bytes):
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            if cut:
                table = pj.read_json(io.BytesIO(data[:cut]), read_options=read, parse_options=parse)
                writer.write_table(table)
                rows += table.num_rows
        if rest.strip():
            table = pj.read_json(io.BytesIO(rest), read_options=read, parse_options=parse)
            writer.write_table(table)
            rows += table.num_rows
    return rows
