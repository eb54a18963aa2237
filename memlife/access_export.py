"""A store's access history, carried with its records when the store moves (export, import).

Nightly scoring weighs how often and how lately each record was recalled, and those reads
live in the access ledger (memlife/ledger.py), not in the records: a store moved with
``export``/``import`` alone scored every record as never recalled. Folding the reads into
``access_count`` at export would count them twice on a re-import into the same store.

``memlife export --access FILE`` writes the ledger rows of the exported records (reads at
or after each record's creation: an earlier record's reads under a reused id are not its)
as Parquet in the ledger's schema. ``memlife import --access FILE`` adds them to the
importing side's ledger after the records:
  - only rows of a record the store holds, by (actor, record id), at or after its creation;
  - a row already in the ledger (same actor, namespace, record id and time) is not added
    again, so importing the same file twice, or after a crash part-way, counts each read once;
  - a row whose ``query_sha256`` is not a sha256 digest is refused and named: the ledger
    never holds query text.
No row holds content: ids, times, ranks and hashes, as in the ledger itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from memlife.errors import InputError
from memlife.ledger import SCHEMA, AccessLedger
from memlife.stores.base import MemoryStore

_KEYS = ["actor_id", "namespace", "record_id", "accessed_at"]


@dataclass
class AccessImport:
    """What ``import --access`` did."""

    rows: int = 0  # added to the ledger
    already: int = 0  # in the ledger before: not added again
    not_in_store: int = 0  # no such record here, or read before the record was created
    refused: list[str] = field(default_factory=list)  # "row N: record X: field: why"

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "already": self.already, "not_in_store": self.not_in_store,
                "refused": self.refused}  # fmt: skip


def births(store: MemoryStore) -> pa.Table:
    """(actor_id, record_id, created_at) of every record of the store, every status."""
    from memlife.run_planning import iter_views
    from memlife.run_types import Shard

    actors: list[str] = []
    ids: list[str] = []
    created: list[int] = []
    for actor in store.list_actors():
        for namespace in store.list_namespaces(actor):
            for views in iter_views(store, Shard(actor, namespace), 1000):
                for v in views:
                    actors.append(v.actor_id)
                    ids.append(v.id)
                    created.append(round(v.created * 1e6))
    stamps = pa.array(created, pa.int64()).cast(SCHEMA.field("accessed_at").type)
    return pa.table({"actor_id": actors, "record_id": ids, "created_at": stamps})


def _own_reads(rows: pa.Table, born: pa.Table) -> pa.Table:
    """The rows of records in ``born``, read at or after the record's creation."""
    joined = rows.join(born, keys=["actor_id", "record_id"], join_type="inner")
    own = joined.filter(pc.greater_equal(joined["accessed_at"], joined["created_at"]))
    return own.select(SCHEMA.names).cast(SCHEMA)


def export_access(store: MemoryStore, ledger: AccessLedger, path: Path) -> int:
    """Write the ledger rows of the store's records to ``path``; returns how many."""
    rows = _own_reads(ledger.read().select(SCHEMA.names), births(store))
    rows = rows.sort_by([("actor_id", "ascending"), ("record_id", "ascending"),
                         ("accessed_at", "ascending")])  # fmt: skip
    pq.write_table(rows, path)
    return int(rows.num_rows)


def read_access_file(path: Path) -> pa.Table:
    """The file's rows in the ledger's schema; a file that is not one is refused by column."""
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{path}: not a Parquet file of ledger rows ({exc})") from None
    for f in SCHEMA:
        if f.name not in table.column_names:
            raise InputError(
                f"{path}: column '{f.name}' is missing (ledger rows have {SCHEMA.names})"
            )
        try:
            table = table.set_column(
                table.column_names.index(f.name), f.name, table[f.name].cast(f.type)
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise InputError(f"{path}: column '{f.name}' is not {f.type} ({exc})") from None
    return table.select(SCHEMA.names)


def import_access(store: MemoryStore, ledger: AccessLedger, path: Path) -> AccessImport:
    """Add the file's rows of this store's records to ``ledger`` (see the module doc)."""
    table = read_access_file(path)
    report = AccessImport()
    digest = pc.match_substring_regex(table["query_sha256"], "^[0-9a-f]{64}$")
    missing = pc.or_kleene(
        pc.is_null(table["accessed_at"]),
        pc.or_kleene(pc.is_null(table["actor_id"]), pc.is_null(table["record_id"])),
    )
    bad = pc.or_kleene(missing, pc.invert(pc.fill_null(digest, True)))
    for i in pc.indices_nonzero(pc.fill_null(bad, True)).to_pylist():
        row = table.slice(i, 1).to_pylist()[0]
        why = ("query_sha256: not a sha256 digest (query text is never kept)"
               if row["accessed_at"] and row["actor_id"] and row["record_id"]
               else "actor_id, record_id and accessed_at are required")  # fmt: skip
        report.refused.append(f"row {i + 1}: record {row['record_id']!r}: {why}")
    good = table.filter(pc.invert(pc.fill_null(bad, True))).cast(SCHEMA)
    own = _own_reads(good, births(store))
    report.not_in_store = good.num_rows - own.num_rows
    have = ledger.read().select(_KEYS)
    new = own.join(have, keys=_KEYS, join_type="left anti") if have.num_rows else own
    new = new.select(SCHEMA.names).cast(SCHEMA)
    report.already = own.num_rows - new.num_rows
    report.rows = ledger.add_rows(new)
    return report
