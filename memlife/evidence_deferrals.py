"""Deferral receipts are evidence too: an erasure a legal hold defers leaves a receipt under
``deferrals/{operation_id}.json`` (memlife/erase.py), and nothing checked them: one removed,
or rewritten to another record or to ``"outcome": "deleted"``, left `receipts verify`
saying "verified" (session 29 compliance review).

A deferred erasure is the run's operation with ``ERASURE_DEFERRED`` among its reason codes
(FAILED with LEGAL_HOLD in the journal; applied later, with an operation receipt of its
own, once the hold is released). Each such row of the run's Parquet must have its deferral
receipt, saying ``deferred`` and agreeing with the row field by field; a deferral receipt
naming the run with no such row is not the run's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memlife.audit import ReceiptSink
from memlife.evidence import _mismatched, fetch_listed
from memlife.run_receipts import loads

DEFERRED = "ERASURE_DEFERRED"


def deferral_key(operation_id: str) -> str:
    return f"deferrals/{operation_id}.json"


def verify_deferrals(
    sink: ReceiptSink, run_id: str, rows: Sequence[dict[str, Any]], v: Any,
    journaled: Callable[[str, object], str | None] | None = None,
    requested_by: object = None,
) -> None:  # fmt: skip
    """Each deferred erasure of ``rows`` has its deferral receipt, agreeing with the row (and,
    given ``journaled``, (operation id, the receipt's hash) -> the journal's hash in that
    form, with the journal too: a plain hash where the row is keyed passes the bucket alone)."""
    deferred = {r["operation_id"]: r for r in rows
                if r["action"] == "erase" and DEFERRED in (r.get("reason_codes") or [])}  # fmt: skip
    keys = list(sink.list("deferrals/"))
    docs = dict(zip(keys, fetch_listed(sink, keys, v), strict=True))
    for oid, r in deferred.items():
        body = docs.get(deferral_key(oid))
        doc = loads(body)
        if body is None:
            v.problem("DEFERRAL_RECEIPT_MISSING", operation_id=oid, record_id=r["record_id"])
        elif doc is None:
            v.problem("RECEIPT_UNREADABLE", key=deferral_key(oid), operation_id=oid)
        else:
            wrong = _mismatched(doc, r, skip=("outcome",))
            wrong += ["outcome"] if doc.get("outcome") != "deferred" else []
            # when, and under which policy, the hold held it back: the seal's row says
            wrong += (
                ["policy_version"] if doc.get("policy_version") != r.get("policy_version") else []
            )
            if requested_by is not None and doc.get("reviewer_identity") not in (
                None,
                requested_by,
            ):
                wrong.append("reviewer_identity")  # who asked: the sealed manifest says
            if r.get("state") == "FAILED" and doc.get("timestamp") != r.get("updated_at"):
                wrong.append("timestamp")
            if journaled is not None and "content_sha256" not in wrong:
                if doc.get("content_sha256") != journaled(oid, doc.get("content_sha256")):
                    wrong.append("content_sha256")
            for field_name in wrong:
                v.problem("DEFERRAL_FIELD_MISMATCH", operation_id=oid, field=field_name)
    for key, body in docs.items():
        oid = key.rsplit("/", 1)[-1].removesuffix(".json")
        doc = loads(body) or {}
        if doc.get("run_id") == run_id and key not in {deferral_key(o) for o in deferred}:
            v.problem("DEFERRAL_NOT_IN_RUN", operation_id=oid, record_id=doc.get("record_id"))
