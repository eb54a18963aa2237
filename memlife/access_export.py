"""A store's access history, carried with its records when the store moves (export, import).

Nightly scoring weighs how often and how lately each record was recalled, and those reads
live in the access ledger (memlife/ledger.py), not in the records: a store moved with
``export``/``import`` alone scored every record as never recalled. Folding the reads into
``access_count`` at export would count them twice on a re-import into the same store.

``memlife export --access FILE`` writes the ledger rows of the exported records (reads at
or after each record's creation: an earlier record's reads under a reused id are not its)
as Parquet in the ledger's schema. ``memlife import --access FILE`` adds them to the
importing side's ledger after the records:
  - only rows of a record the store holds, by actor, record id and namespace, read at or
    after its creation (AgentCore's own record ids, which CloudTrail reads carry, are
    written under ours);
  - each read once: a row already in the ledger, or listed twice in the file (same actor,
    record id and time, as scoring counts them), is not added again, so importing the same
    file twice, or again after a crash part-way, counts each read once;
  - refused and named by row (exit 1, the rest imported): a row missing a required field,
    one stamped later than tomorrow, one whose ``query_sha256`` is not a sha256 digest
    (the ledger never holds query text);
  - a file that is not ledger rows is refused by column before any record is imported: a
    column missing or of another type, or times without a zone (never guessed to be UTC).
No row holds content: ids, times, ranks and hashes, as in the ledger itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from memlife.errors import InputError
from memlife.ledger import SCHEMA, AccessLedger
from memlife.model import utcnow
from memlife.stores.base import MemoryStore

_KEYS = ["actor_id", "record_id", "accessed_at"]  # one read; scoring keys the same way
FUTURE_SKEW = timedelta(days=1)  # a read stamped later than this is refused, by row


@dataclass
class AccessImport:
    """What ``import --access`` did."""

    rows: int = 0  # added to the ledger
    already: int = 0  # in the ledger before, or earlier in the file: not added again
    not_in_store: int = 0  # no such record here, or read before the record was created
    refused: list[str] = field(default_factory=list)  # "row N: record X: field: why"

    def as_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "already": self.already, "not_in_store": self.not_in_store,
                "refused": self.refused}  # fmt: skip


_BIRTHS = pa.schema([
    ("actor_id", pa.string()), ("record_id", pa.string()), ("namespace", pa.string()),
    ("created_at", SCHEMA.field("accessed_at").type), ("as_id", pa.string()),
])  # fmt: skip


def births(store: MemoryStore) -> pa.Table:
    """(actor_id, record_id, namespace, created_at, as_id) of every record of the store, any
    status. A record AgentCore also names by its own id (CloudTrail reads carry that one)
    has a second row under it, ``as_id`` saying which record it is."""
    from memlife.run_planning import iter_views
    from memlife.run_types import Shard

    rows: dict[str, list[Any]] = {name: [] for name in _BIRTHS.names}
    native = getattr(store, "native_ids", None)
    shards = (Shard(a, ns) for a in store.list_actors() for ns in store.list_namespaces(a))
    for views in (page for shard in shards for page in iter_views(store, shard, 1000)):
        aliases = native([v.id for v in views]) if native is not None else {}
        for v in views:
            for rid in {v.id, aliases.get(v.id, v.id)}:
                rows["actor_id"].append(v.actor_id)
                rows["record_id"].append(rid)
                rows["namespace"].append(v.namespace)
                rows["created_at"].append(round(v.created * 1e6))
                rows["as_id"].append(v.id)
    rows["created_at"] = pa.array(rows["created_at"], pa.int64()).cast(
        _BIRTHS.field("created_at").type
    )
    return pa.table(rows, schema=_BIRTHS)


def _own_reads(rows: pa.Table, born: pa.Table) -> pa.Table:
    """The rows of records in ``born`` (same actor, id and namespace), read at or after the
    record's creation, under our record id."""
    joined = rows.join(born, keys=["actor_id", "record_id", "namespace"], join_type="inner")
    own = joined.filter(pc.greater_equal(joined["accessed_at"], joined["created_at"]))
    own = own.set_column(own.column_names.index("record_id"), "record_id", own["as_id"])
    return own.select(SCHEMA.names).cast(SCHEMA)


def _once(rows: pa.Table) -> pa.Table:
    """One row per (actor, record id, time): a read listed twice is one read."""
    if rows.num_rows == 0:
        return rows
    rows = rows.append_column("_row", pa.array(range(rows.num_rows), pa.int64()))
    first = rows.group_by(_KEYS, use_threads=False).aggregate([("_row", "min")])
    return rows.take(first["_row_min"]).select(SCHEMA.names)


def export_access(store: MemoryStore, ledger: AccessLedger, path: Path) -> int:
    """Write the ledger rows of the store's records to ``path``; returns how many."""
    rows = _once(_own_reads(ledger.read().select(SCHEMA.names), births(store)))
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
        got = table[f.name].type
        if pa.types.is_timestamp(f.type) and not (
            pa.types.is_timestamp(got) or pa.types.is_string(got) or pa.types.is_large_string(got)
        ):  # a cast would read a number as microseconds since 1970: every read lost, silently
            raise InputError(f"{path}: column '{f.name}' is not {f.type} ({got})")
        if pa.types.is_timestamp(got) and got.tz is None:  # a cast would guess UTC (audit 49i)
            raise InputError(
                f"{path}: column '{f.name}' has times without a time zone ({got}); "
                "write them with one (UTC): a time is never guessed"
            )
        try:
            table = table.set_column(
                table.column_names.index(f.name), f.name, table[f.name].cast(f.type)
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise InputError(f"{path}: column '{f.name}' is not {f.type} ({exc})") from None
    return table.select(SCHEMA.names)


def import_access(
    store: MemoryStore, ledger: AccessLedger, source: Path | pa.Table, now: datetime | None = None
) -> AccessImport:
    """Add the rows of this store's records to ``ledger`` (see the module doc): from a file,
    or from the table :func:`read_access_file` already gave."""
    table = source if isinstance(source, pa.Table) else read_access_file(source)
    report = AccessImport()
    latest = pa.scalar((now or utcnow()) + FUTURE_SKEW, type=SCHEMA.field("accessed_at").type)
    checks = [
        ("actor_id, namespace, record_id and accessed_at are required",
         _any_null(table, ["actor_id", "namespace", "record_id", "accessed_at"])),
        ("accessed_at: later than now", pc.greater(table["accessed_at"], latest)),
        ("query_sha256: not a sha256 digest (query text is never kept)",
         pc.invert(pc.match_substring_regex(table["query_sha256"], "^[0-9a-f]{64}$"))),
    ]  # fmt: skip
    bad = pa.array([False] * table.num_rows, type=pa.bool_())  # typed: an empty file is 0 rows
    for why, flags in checks:
        flags = pc.and_(pc.fill_null(flags, False), pc.invert(bad))  # one reason a row
        for i in pc.indices_nonzero(flags).to_pylist():
            report.refused.append(f"row {i + 1}: record {table['record_id'][i].as_py()!r}: {why}")
        bad = pc.or_(bad, flags)
    good = table.filter(pc.invert(bad)).cast(SCHEMA)
    own = _own_reads(good, births(store))
    report.not_in_store = good.num_rows - own.num_rows
    once = _once(own)
    have = ledger.read().select(_KEYS)
    new = once.join(have, keys=_KEYS, join_type="left anti") if have.num_rows else once
    new = new.select(SCHEMA.names).cast(SCHEMA)
    report.already = own.num_rows - new.num_rows  # in the ledger, or earlier in the file
    report.rows = ledger.add_rows(new)
    return report


def _any_null(table: pa.Table, names: list[str]) -> pa.ChunkedArray:
    flags = pc.is_null(table[names[0]])
    for name in names[1:]:
        flags = pc.or_(flags, pc.is_null(table[name]))
    return flags
