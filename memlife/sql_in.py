"""``... IN (?, ?, ...)`` over a long list of keys, for every SQLite table we keep.

SQLite caps the bound parameters of one statement (999 on older builds), so a long key
list is asked in chunks. One place says how; each query keeps its own SQL.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

CHUNK = 500  # keys a statement, with room for a few other parameters under 999


def marks(n: int) -> str:
    """``?, ?, ?`` for ``n`` parameters."""
    return ", ".join("?" * n)


def in_chunks(keys: Sequence[T], size: int = CHUNK) -> Iterator[tuple[str, list[T]]]:
    """Each chunk of ``keys`` with its placeholders: ``for qs, chunk in in_chunks(ids):
    con.execute(f"... WHERE id IN ({qs})", chunk)``."""
    for i in range(0, len(keys), size):
        chunk = list(keys[i : i + size])
        yield marks(len(chunk)), chunk
