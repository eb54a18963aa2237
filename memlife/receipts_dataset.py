"""Receipts as a dataset: every run's operations as Hive-partitioned Parquet, on its own prefix.

Layout (under the receipts root, ``file://`` or ``s3://``; docs/receipts.md)::

    dataset/operations/date=YYYY-MM-DD/run_id=<run_id>/part-0.parquet
    dataset/operations/date=YYYY-MM-DD/run_id=<run_id>/part-NNN.parquet   (a later seal's)

``date`` is the run's processing cutoff (UTC), the same day as its ``runs/yyyy/mm/dd/``
folder. The prefix holds Parquet only, so ``pyarrow.dataset``, DuckDB
(``read_parquet(..., hive_partitioning = true)``) and Athena (partition projection) read
it as one table. Columns are typed (timestamps are timestamps) and carry the run's mode,
cutoff, policy version, service identity and store beside each operation (stores sharing one
receipts location are told apart in the one table). Content-free: ids,
codes, hashes, counts and times, as every receipt. Files are create-only like receipts:
each seal of a run (a crashed attempt's failure receipt, then the rerun's completion) writes
its own file, ``part-0``, then ``part-001``, ``part-002``, ...; each holds all of the run's
operations as they stood at that seal, so a reader takes the run's latest file only: the
one its result's receipt seals (``evidence.dataset_key``; memlife/receipts_history.py reads
it), else the greatest name (docs/receipts.md shows the DuckDB view that does so).
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from memlife.audit import ReceiptSink, holds_exactly
from memlife.journal import Operation

PREFIX = "dataset/operations"

# the file's columns; date and run_id come from the path (hive partitions)
SCHEMA = pa.schema(
    [
        pa.field("operation_id", pa.string(), nullable=False),
        pa.field("actor_id", pa.string(), nullable=False),
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("record_id", pa.string(), nullable=False),
        pa.field("action", pa.string(), nullable=False),
        pa.field("reason_codes", pa.list_(pa.string())),
        pa.field("outcome", pa.string()),
        pa.field("state", pa.string()),
        pa.field("attempts", pa.int32()),
        pa.field("replacement_id", pa.string()),
        pa.field("content_sha256", pa.string()),
        pa.field("updated_at", pa.timestamp("us", tz="UTC")),
        pa.field("mode", pa.string()),
        pa.field("cutoff", pa.timestamp("us", tz="UTC")),
        pa.field("policy_version", pa.string()),
        pa.field("service_identity", pa.string()),
        # which store the run changed (stores.store_identity: sqlite: + the file's path, or
        # agentcore://MEMORY_ID@REGION); absent from files written before session 32
        pa.field("store", pa.string()),
    ]
)

PART_KEY = re.compile(
    rf"^{PREFIX}/date=(\d{{4}}-\d{{2}}-\d{{2}})/run_id=([^/]+)/part-(0|\d{{3}})\.parquet$"
)


def is_part_key(key: str) -> bool:
    """Whether ``key`` names a partition file (``part-0.parquet``, ``part-NNN.parquet``)."""
    return PART_KEY.match(key) is not None


def dataset_key(run_id: str, cutoff: datetime, n: int = 0) -> str:
    """The run's ``n``th partition file: part-0.parquet, then part-001.parquet, ... (names
    that sort in the order they were written)."""
    day = cutoff.astimezone(UTC).date().isoformat()
    part = "0" if n == 0 else f"{n:03d}"
    return f"{PREFIX}/date={day}/run_id={run_id}/part-{part}.parquet"


def operations_table(
    ops: Sequence[Operation], *, mode: str, cutoff: datetime, service_identity: str,
    store: str | None = None,
) -> pa.Table:  # fmt: skip
    cut = cutoff.astimezone(UTC)
    rows = [
        {
            "operation_id": o.operation_id,
            "actor_id": o.actor_id,
            "namespace": o.namespace,
            "record_id": o.record_id,
            "action": o.kind.value,
            "reason_codes": list(o.reasons),
            "outcome": o.outcome.value if o.outcome else None,
            "state": o.state.value,
            "attempts": o.attempts,
            "replacement_id": o.replacement_id,
            "content_sha256": o.content_sha256,
            "updated_at": o.updated_at.astimezone(UTC) if o.updated_at else None,
            "mode": mode,
            "cutoff": cut,
            "policy_version": o.policy_version,
            "service_identity": service_identity,
            "store": store,
        }
        for o in ops
    ]
    return pa.Table.from_pylist(rows, schema=SCHEMA)


class DatasetPart(NamedTuple):
    """A partition file as written: its key and the sha256 of its bytes (the run receipt
    seals both: ``evidence.seal``)."""

    key: str
    sha256: str


def write_operations(
    sink: ReceiptSink, ops: Sequence[Operation], *, run_id: str, cutoff: datetime, mode: str,
    store: str | None = None,
) -> DatasetPart | None:  # fmt: skip
    """Create this seal's partition file of the run; its key and digest, or None when
    there is nothing to write (or no free name).

    Create-only: an earlier seal's file stays as written (as receipts do); this one takes
    the next name, so the run's latest file is its latest seal's operations.
    """
    if not ops:
        return None
    from memlife.receipts import service_identity

    table = operations_table(
        ops, mode=mode, cutoff=cutoff, service_identity=service_identity(), store=store
    )
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    body = buf.getvalue()
    for n in range(1000):
        key = dataset_key(run_id, cutoff, n)
        # the same bytes a killed attempt left unsealed: this seal's (evidence.seal)
        if sink.put_new(key, body, "application/vnd.apache.parquet") or holds_exactly(
            sink, key, body
        ):
            return DatasetPart(key, hashlib.sha256(body).hexdigest())
    return None
