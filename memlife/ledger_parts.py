"""Which access-ledger part files are live: a part written to replace others (a day's
compaction, an erasure's rewrite) names them in its metadata, and a crash between its
write and their removal leaves both; a part cut short (a full disk, a partial copy of the
home) is named and left out, else every night and every erasure stopped on it."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

# a part written to replace others (a day's compaction, an erasure's rewrite) names them
REPLACING = "part-r-"
REPLACES = b"memlife.replaces"


def readable(part: Path) -> bool:
    """A part whose footer reads. One that does not (cut short: a full disk, a partial copy
    of the home) is named and left out: else every night stopped on it."""
    import pyarrow.parquet as pq

    try:
        pq.read_schema(part)
    except (OSError, pa.ArrowInvalid) as exc:
        warnings.warn(f"access ledger: unreadable part {part}: {exc}", RuntimeWarning, 2)
        return False
    return True


def replaced(parts: Sequence[Path]) -> set[Path]:
    """The parts that replacing parts among ``parts`` name (their metadata)."""
    gone: set[Path] = set()
    for p in parts:
        if p.name.startswith(REPLACING):
            meta = pq.read_schema(p).metadata or {}
            if REPLACES in meta:
                gone |= {p.parent / n for n in json.loads(meta[REPLACES])}
    return gone


def live_parts(root: Path) -> list[Path]:
    """The readable parts under ``root`` no other part replaces."""
    if not root.is_dir():
        return []
    every = [p for p in sorted(root.glob("date=*/part-*.parquet")) if readable(p)]
    gone = replaced(every)
    return [p for p in every if p not in gone] if gone else every
