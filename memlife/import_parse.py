"""The import's per-line work: JSONL bytes -> store rows, in this process or in the
worker processes of ``import_turns``.

:func:`parse_chunk` turns a block of whole lines into rows (``stores.sqlite.record_to_row``'s
columns) and errors, through the columnar path where the block allows; :class:`Threads`
runs it beside the importing thread. This module imports no numpy, policy or store
connection, so a worker starts small.

Each line goes through the same checks in the same order as ``importer.parse_line``:
UTF-8, nesting depth, the fast path (``fast_record.fast_row``), else the checked path
(``model.parse_record_line``, which names the error, then :func:`check_declared_sha256`),
then the content size bound.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from memlife import faults

# the per-line work lives in import_lines (the columnar path uses it too); re-exported here
from memlife.import_lines import (
    MAX_DEPTH,
    Chunk,
    Parsed,
    check_declared_sha256,
    checked_text,
    json_depth,
    line_row,
    parse_lines,
)

__all__ = ["MAX_DEPTH", "Chunk", "Parsed", "Threads", "check_declared_sha256", "checked_text",
           "json_depth", "line_row", "parse_chunk", "parse_chunk_table", "parse_lines"]  # fmt: skip


def parse_chunk(chunk: Chunk) -> Parsed:
    """In a worker: the rows and errors of a chunk's lines (the serial loop's checks),
    through the columnar path when the block allows (``import_columnar.parse_block``)."""
    faults.checkpoint("import_chunk")
    from memlife.import_columnar import parse_block  # pyarrow: loaded on the first block

    return parse_block(chunk)


def parse_chunk_table(chunk: Chunk) -> tuple[Any, list[tuple[str | None, str, str, int | None]]]:
    """:func:`parse_chunk` as one Arrow table and the errors (``import_table.ROW_SCHEMA``):
    what an import worker keeps for its turn to write."""
    faults.checkpoint("import_chunk")
    from memlife.import_columnar import parse_block_table

    return parse_block_table(chunk)


class Threads:
    """Parsing on threads of this process (pyarrow's reader and SQLite's writes release the
    GIL); results are taken in the order the chunks were given."""

    def __init__(self, count: int = 1):
        self.count = count
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, count), thread_name_prefix="memlife-parse"
        )
        self._order: deque[Future[Parsed]] = deque()
        self._inline: deque[Chunk] = deque()

    @property
    def in_flight(self) -> int:
        return len(self._order) + len(self._inline)

    def submit(self, chunk: Chunk) -> None:
        if self.count == 0:
            self._inline.append(chunk)
            return
        self._order.append(self._pool.submit(parse_chunk, chunk))

    def result(self) -> Parsed:
        if self.count == 0:
            return parse_chunk(self._inline.popleft())
        return self._order.popleft().result()

    def close(self) -> None:
        for pending in self._order:
            pending.cancel()
        self._pool.shutdown(wait=True)

    def __enter__(self) -> Threads:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
