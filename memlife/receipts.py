"""Receipt documents: per operation, per run (JSON) and operations.parquet. Content-free.

A receipt holds ids, hashes, codes, counts and times only. That is enforced here by
construction (only those fields are ever copied in) and proven by the canary tests.
"""

from __future__ import annotations

import io
import os
import socket
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from memlife import __version__
from memlife.audit import ReceiptSink, dumps
from memlife.journal import Operation
from memlife.model import utcnow
from memlife.settings import settings


def service_identity() -> str:
    """Who acted: MEMLIFE_SERVICE_IDENTITY (e.g. an IAM role ARN) or memlife@host."""
    return settings().service_identity or f"memlife/{__version__}@{socket.gethostname()}"


def operator_identity() -> str:
    """Who asked for a manual action: MEMLIFE_OPERATOR (a person or ticket), else the OS
    user at this host, so a hold release or an erasure never names nobody."""
    import getpass

    if named := settings().operator:
        return named
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid (a bare container)
        user = f"uid-{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def operation_receipt(op: Operation, reviewer: str | None = None) -> dict[str, Any]:
    return {
        "operation_id": op.operation_id,
        "run_id": op.run_id,
        "scope": {"actor_id": op.actor_id, "namespace": op.namespace},
        "record_id": op.record_id,
        "action": op.kind.value,
        "reason_codes": list(op.reasons),
        "policy_version": op.policy_version,
        "service_identity": service_identity(),
        "reviewer_identity": reviewer,
        "timestamp": (op.updated_at or utcnow()).isoformat(),
        "replacement_id": op.replacement_id,
        "outcome": op.outcome.value if op.outcome else None,
        "attempts": op.attempts,
        "content_sha256": op.content_sha256,
    }


def operation_key(operation_id: str) -> str:
    return f"operations/{operation_id}.json"


def write_operation_receipt(sink: ReceiptSink, op: Operation, reviewer: str | None = None) -> bool:
    """Create-only; False when this operation's receipt already exists (a rerun)."""
    return sink.put_new(operation_key(op.operation_id), dumps(operation_receipt(op, reviewer)))


PARQUET_SCHEMA = pa.schema(
    [
        ("operation_id", pa.string()),
        ("run_id", pa.string()),
        ("actor_id", pa.string()),
        ("namespace", pa.string()),
        ("record_id", pa.string()),
        ("action", pa.string()),
        ("reason_codes", pa.list_(pa.string())),
        ("policy_version", pa.string()),
        ("replacement_id", pa.string()),
        ("state", pa.string()),
        ("outcome", pa.string()),
        ("attempts", pa.int32()),
        ("content_sha256", pa.string()),
        ("updated_at", pa.string()),
    ]
)


def operations_parquet(ops: Sequence[Operation]) -> bytes:
    rows = [
        {
            "operation_id": o.operation_id,
            "run_id": o.run_id,
            "actor_id": o.actor_id,
            "namespace": o.namespace,
            "record_id": o.record_id,
            "action": o.kind.value,
            "reason_codes": list(o.reasons),
            "policy_version": o.policy_version,
            "replacement_id": o.replacement_id,
            "state": o.state.value,
            "outcome": o.outcome.value if o.outcome else None,
            "attempts": o.attempts,
            "content_sha256": o.content_sha256,
            "updated_at": o.updated_at.isoformat() if o.updated_at else None,
        }
        for o in ops
    ]
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=PARQUET_SCHEMA), buf, compression="zstd")
    return buf.getvalue()
