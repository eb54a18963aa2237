"""A batch of store rows as one Arrow table: what an import worker keeps between its parse
and its turn to write, and what its writer binds as it is (``import_ingest``).

Building the same rows as Python tuples and binding them one value at a time cost about
as much as parsing them (BENCHMARKS.md, "Eighth pass"); a table never holds a Python
object a value. Its columns are the store's (``stores.sqlite.COLUMNS``), each typed as the
value SQLite gets from the row path (text, REAL, INTEGER), then the line number and
whether ``created_at`` lies in the future (a warning)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from memlife.stores.sqlite import COLUMNS

_REAL = {"confidence", "created_ts", "last_accessed_ts", "last_verified_ts", "expires_ts",
         "status_changed_ts"}  # fmt: skip
_INTEGER = {"access_count", "negated"}


def _kind(name: str) -> pa.DataType:
    if name in _REAL:
        return pa.float64()
    return pa.int64() if name in _INTEGER else pa.string()


ROW_SCHEMA = pa.schema(
    [(name, _kind(name)) for name in COLUMNS] + [("line", pa.int64()), ("future", pa.bool_())]
)


def rows_table(rows: list[tuple[int, tuple[Any, ...], bool]]) -> pa.Table:
    """(line, store row, future) triples as a table (the lines the columnar path did not
    take: a few a block, if any)."""
    columns = list(zip(*(row for _, row, _ in rows), strict=True)) or [()] * len(COLUMNS)
    arrays = [pa.array(v, _kind(name)) for name, v in zip(COLUMNS, columns, strict=True)]
    arrays.append(pa.array([n for n, _, _ in rows], pa.int64()))
    arrays.append(pa.array([f for _, _, f in rows], pa.bool_()))
    return pa.Table.from_arrays(arrays, schema=ROW_SCHEMA)


def table_rows(table: pa.Table) -> list[tuple[int, tuple[Any, ...], bool]]:
    """The table's (line, store row, future) triples, values as the row path has them."""
    columns = [table.column(name).to_pylist() for name in COLUMNS]
    rows = zip(*columns, strict=True)
    return list(
        zip(table.column("line").to_pylist(), rows, table.column("future").to_pylist(), strict=True)
    )
