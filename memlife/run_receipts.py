"""A run's receipts in order: receipt.json, then receipt.N.json for each rerun that follows
an attempt that did not finish (``FOLLOWED``). Evidence is never overwritten; which
receipt is the run's result (:func:`effective_receipt`) and whether a rerun may commit
(:func:`completed_status`) are read from this sequence."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memlife.audit import ReceiptSink, ReceiptWriteError, dumps
from memlife.journal import Operation
from memlife.model import _unique_keys  # a key written twice refused, as import does


def receipt_key(prefix: str, n: int) -> str:
    return f"{prefix}/receipt.json" if n == 1 else f"{prefix}/receipt.{n}.json"


def page_key(prefix: str, receipt_key: str | None = None) -> str:
    """The report page beside ``receipt_key``: ``report.html`` beside ``receipt.json`` (and
    a completed run's rerun, which names that receipt), ``report.N.html`` beside a rerun's
    ``receipt.N.json`` (audit 51vii: a rerun that finished a partial failure printed the
    first attempt's page, with its status and counts)."""
    name = (receipt_key or "").rsplit("/", 1)[-1]
    n = name[len("receipt.") : -len(".json")] if name.startswith("receipt.") else ""
    return f"{prefix}/report.{n}.html" if n.isdigit() else f"{prefix}/report.html"


# a run's receipts a rerun's receipt may follow: the attempt did not finish everything (a
# crash, an abandoned run's seal, failed shards). A rerun of a partial failure finishes
# what that one left, so what it commits needs a receipt of its own (session 43, audit a).
FOLLOWED = ("failure", "partial_failure")


def put_run_receipt(sink: ReceiptSink, prefix: str, receipt: dict[str, Any]) -> str | None:
    """Create-only: receipt.json, or receipt.N.json when a rerun follows an attempt that
    did not finish (``FOLLOWED``: a crash's, an abandoned run's seal, a partial failure);
    its key.

    Evidence is never overwritten. A rerun that finds a receipt of a finished attempt
    (success / blocked) moves on without writing another: nothing follows such a receipt
    (``verify``: RECEIPT_AFTER_COMPLETION), and the rerun commits nothing
    (``run_commit``).
    """
    body = dumps(receipt)
    for n in range(1, 1000):
        key = receipt_key(prefix, n)
        if sink.put_new(key, body):
            return key
        found = sink.get(key)
        if found == body and sink.get(receipt_key(prefix, n + 1)) is None:
            # our own write, the last: its answer was lost and the retried PUT met
            # If-None-Match (412). Following it wrote a copy that broke the chain (audit 49g).
            return key
        existing = loads(found) or {}
        if existing.get("status") not in FOLLOWED:
            return key  # an earlier attempt of this same run already completed
    return None


def run_receipts(sink: ReceiptSink, prefix: str) -> list[tuple[str, bytes]]:
    """(key, bytes) of receipt.json, receipt.2.json, ... in order, up to the first missing."""
    out: list[tuple[str, bytes]] = []
    for n in range(1, 1000):
        key = receipt_key(prefix, n)
        body = sink.get(key)
        if body is None:
            break
        out.append((key, body))
    return out


def completed_receipt(sink: ReceiptSink, prefix: str, ops: Sequence[Operation]) -> str | None:
    """The key of this run's completed receipt when it already seals every RECEIPTED
    operation in ``ops``: a rerun of a completed run then seals nothing more (no second
    Parquet, no re-read of every operation receipt), and ``put_run_receipt`` would return
    this key anyway (even when it lacks operations a retry receipted since: the retry's
    own receipt accounts for them). None otherwise (no receipt, or failures only)."""
    del ops  # nothing may follow a completed receipt (``put_run_receipt``): sealing again
    # would only leave a Parquet that no receipt names (``verify``: PARQUET_NOT_SEALED)
    found = _completed(sink, prefix)
    return found[0] if found is not None else None


def completed_status(sink: ReceiptSink, prefix: str) -> str | None:
    """The status of this run's completed receipt (success, blocked); None where it has
    none (not run, or attempts that did not finish only: ``FOLLOWED``)."""
    found = _completed(sink, prefix)
    return str(found[1].get("status")) if found is not None else None


def completed_counts(sink: ReceiptSink, prefix: str) -> dict[str, int]:
    """The lifecycle counts of this run's completed receipt ({} where it has none)."""
    found = _completed(sink, prefix)
    counts = found[1].get("counts") if found is not None else None
    return {k: v for k, v in counts.items() if type(v) is int} if isinstance(counts, dict) else {}


def published_counts(sink: ReceiptSink, prefix: str) -> dict[str, int]:
    """The counts earlier attempts of this run published as metrics: its last
    ``partial_failure`` receipt's (``finish_run`` publishes once it wrote one; a ``failure``
    receipt comes from an attempt that published nothing). {} where there is none."""
    last: dict[str, int] = {}
    for _, body in run_receipts(sink, prefix):
        doc = loads(body) or {}
        if doc.get("status") == "partial_failure" and isinstance(doc.get("counts"), dict):
            last = {k: v for k, v in doc["counts"].items() if type(v) is int}
    return last


def completed_outcome(sink: ReceiptSink, prefix: str) -> tuple[str | None, dict[str, Any] | None]:
    """The status and gate verdict of this run's completed receipt ((None, None) where it has
    none; a gate that is no object: None)."""
    found = _completed(sink, prefix)
    if found is None:
        return None, None
    gate = found[1].get("gate")
    return str(found[1].get("status")), gate if isinstance(gate, dict) else None


def completed_plan(sink: ReceiptSink, prefix: str) -> tuple[dict[str, int], int | None]:
    """The planned actions and records found of this run's completed receipt (({}, None)
    where it has none, or where a figure is no count)."""
    found = _completed(sink, prefix)
    doc = found[1] if found is not None else {}
    planned, records = doc.get("planned"), doc.get("records_found")
    if not isinstance(planned, dict) or not all(type(v) is int for v in planned.values()):
        planned = {}
    return planned, records if type(records) is int else None


def _completed(sink: ReceiptSink, prefix: str) -> tuple[str, dict[str, Any]] | None:
    for key, body in run_receipts(sink, prefix):
        doc = loads(body) or {}
        if doc.get("status") not in FOLLOWED:
            return key, doc
    return None


def loads(body: bytes | None) -> dict[str, Any] | None:
    """A JSON object, or None (missing, unreadable, not an object, a key written twice: a
    reviewer's JSON reader may take the other value; or nested past the parser's depth,
    which raised RecursionError and stopped the verification of every run)."""
    try:
        doc = json.loads(body, object_pairs_hook=_unique_keys) if body is not None else None
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def effective_receipt(receipts: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The run's result: the first completed receipt (nothing may follow it), else the last
    attempt that sealed its work (the last attempt where none did). Only an attempt that
    did not finish (``FOLLOWED``) is ever followed by another receipt."""
    for r in receipts:
        if r.get("status") not in FOLLOWED:
            return r
    # the last failure that sealed its work: an unsealed one after it proves nothing
    sealed_ones = [r for r in receipts if isinstance(r.get("evidence"), dict)]
    return sealed_ones[-1] if sealed_ones else (receipts[-1] if receipts else None)


# What every attempt of a run (a rerun, a child batch) writes alike in its manifest: the run
# key's inputs. started_at, memlife_version, the store URL as spelt and the policy file's
# bytes (a comment edited) may differ between attempts of one run.
RUN_FIELDS = ("run_id", "run_key", "mode", "policy_version", "cutoff", "scope", "store_identity",
              "consolidator", "eval_cases")  # fmt: skip


def check_own_folder(
    sink: ReceiptSink, prefix: str, manifest: dict[str, Any], created: bool
) -> None:
    """Refuse (ReceiptWriteError, before any change) a run folder holding evidence no attempt
    of this run wrote. Run ids are predictable (a hash of the policy, cutoff and store), so
    a bucket writer could fill a night's folder first: a planted receipt.json made the night
    a "rerun of a completed run" that committed nothing and reported the forged counts, and a
    planted manifest was sealed as the run's, verified clean (audit 49g). Every attempt
    writes the manifest before any receipt: where ours is new, a receipt there is not ours;
    where one was there, it must be an earlier attempt's."""
    mkey = f"{prefix}/manifest.json"
    if created:
        # a kept gate verdict (memlife/evidence_gate.py) is written after the manifest too
        planted = [k for k in (receipt_key(prefix, 1), f"{prefix}/gate.json")
                   if sink.get(k) is not None]  # fmt: skip
        if planted:
            raise ReceiptWriteError(
                f"{sink.location(planted[0])}: evidence "
                f"of run {manifest.get('run_id')} that no attempt of it wrote (its manifest was "
                "not there); refused before any change"
            )
        return
    kept = loads(sink.get(mkey))
    ours = json.loads(dumps({k: manifest.get(k) for k in RUN_FIELDS}))
    wrong = [k for k in RUN_FIELDS if kept is None or kept.get(k) != ours[k]]
    if wrong:
        raise ReceiptWriteError(
            f"{sink.location(mkey)}: not this run's manifest ({', '.join(wrong)} differ "
            "from what this run writes); refused before any change"
        )
