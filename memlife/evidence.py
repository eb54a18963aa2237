"""Tamper-evident run evidence: a digest that binds a run's receipt to its operations.

Written last, the run receipt carries ``evidence``:
  - ``manifest_sha256``: the manifest written first;
  - ``parquet_key`` / ``parquet_sha256``: this attempt's operations Parquet (one file per
    attempt: a rerun never meets an earlier attempt's rows);
  - ``operations``: ``count`` and ``chain_sha256``, a hash chain over the operation
    receipts of the run in operation-id order, link = sha256(prev | id | sha256(bytes));
and ``digest``: sha256 over the canonical JSON of the whole receipt (counts included).

``verify_evidence`` needs nothing but read access to the receipts (``--evidence-only``):
digest, manifest, Parquet, every operation receipt (present, unchanged, fields equal to
its row), no receipt claiming this run outside its Parquet, counts equal to the rows.
Threat model (docs/receipts.md): a writer to an unlocked bucket can rewrite all of it
consistently; S3 Object Lock (compliance mode) on the bucket plus this digest is the
defence, and the journal cross-check of ``memlife receipts verify``
(memlife/evidence_journal.py) catches what a consistent rewrite of the bucket alone would
hide.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow.parquet as pq

from memlife.apply.counts import deferral
from memlife.audit import ReceiptReadError, ReceiptSink, holds_exactly
from memlife.evidence_dataset import unnamed_parquet, verify_dataset
from memlife.evidence_key import PREFIX as KEYED
from memlife.journal import Operation
from memlife.receipts import operation_key, operations_parquet
from memlife.receipts_dataset import write_operations
from memlife.run_receipts import FOLLOWED, loads, run_receipts

# a seal's partition file of the receipts dataset: run id, cutoff, mode
DatasetTarget = tuple[str, datetime, str]

CHANGES = ("consolidated", "superseded", "deleted", "quarantined", "failed")
# The receipt field a row/journal value must equal (receipt name, row name).
FIELDS = (("record_id", "record_id"), ("action", "action"), ("outcome", "outcome"),
          ("replacement_id", "replacement_id"), ("content_sha256", "content_sha256"),
          ("reason_codes", "reason_codes"), ("run_id", "run_id"))  # fmt: skip
_RUN_SAYS = ("mode", "policy_version", "cutoff", "scope")  # in a run's manifest and receipts
_COUNT_OF = {"deleted": "deleted", "already_absent": "deleted", "written": "consolidated",
             "superseded": "superseded", "quarantined": "quarantined"}  # fmt: skip


def sha256(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def receipt_digest(receipt: dict[str, Any]) -> str:
    body = {k: v for k, v in receipt.items() if k != "digest"}
    return sha256(json.dumps(body, sort_keys=True, default=str, separators=(",", ":")).encode())


def chain(sink: ReceiptSink, operation_ids: Iterable[str]) -> tuple[int, str, dict[str, bytes]]:
    """(receipts found, chain head, their bodies) over the operation receipts, id order.
    Bodies are fetched a few at a time (an S3 GET is a round trip; order is kept)."""
    head, n, bodies = "0" * 64, 0, {}
    ids = sorted(set(operation_ids))
    for oid, body in zip(ids, fetch_all(sink, [operation_key(oid) for oid in ids]), strict=True):
        if body is None:
            continue
        head = sha256(f"{head}|{oid}|{sha256(body)}".encode())
        n += 1
        bodies[oid] = body
    return n, head, bodies


def fetch_listed(sink: ReceiptSink, keys: Sequence[str], v: Any) -> Iterator[bytes | None]:
    """``fetch_all`` of keys a listing showed: one that does not read is RECEIPT_UNREADABLE
    (its key and code) and None, so the rest is verified."""
    from memlife.audit import ReceiptReadError

    def get(key: str) -> bytes | None:
        try:
            return sink.get(key)
        except ReceiptReadError as exc:
            v.problem("RECEIPT_UNREADABLE", key=key, error=exc.code)
            return None

    return fetch_all(sink, keys, get)


def fetch_all(
    sink: ReceiptSink, keys: Sequence[str], get: Callable[[str], bytes | None] | None = None
) -> Iterator[bytes | None]:
    """``sink.get`` of each key, in order; a sink whose reads are round trips (S3) says how
    many may be in flight (``concurrent_gets``). Local files read fastest one by one."""
    get = get or sink.get
    threads = getattr(sink, "concurrent_gets", 1)
    if threads < 2 or len(keys) < 2 * threads:
        yield from map(get, keys)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads, thread_name_prefix="memlife-receipts") as pool:
        yield from pool.map(get, keys)


def seal(
    sink: ReceiptSink, prefix: str, ops: Sequence[Operation], dataset: DatasetTarget | None = None,
    *, secret: bytes,
) -> dict[str, Any]:  # fmt: skip
    """Write this attempt's operations Parquet (create-only), and with ``dataset`` (run id,
    cutoff, mode) its partition file of the receipts dataset, and return the evidence block
    that names (and so seals) both. Content hashes are keyed by ``secret`` (the store's run
    secret: memlife/evidence_key.py)."""
    from memlife.evidence_key import for_evidence

    ops = [for_evidence(o, secret) for o in ops]
    manifest = sink.get(f"{prefix}/manifest.json")
    parquet_key = parquet_sha = None
    if ops:
        body = operations_parquet(ops)
        for n in range(1, 1000):
            key = f"{prefix}/operations.parquet" if n == 1 else f"{prefix}/operations.{n}.parquet"
            # an attempt killed before its receipt left this very file: it is this seal's
            # (named by no receipt, it failed verify for good: audit 47k)
            if sink.put_new(key, body, "application/vnd.apache.parquet") or holds_exactly(
                sink, key, body
            ):
                parquet_key, parquet_sha = key, sha256(body)
                break
    part = None
    if dataset is not None and ops:
        run_id, cutoff, mode = dataset
        part = write_operations(sink, ops, run_id=run_id, cutoff=cutoff, mode=mode,
                                store=_manifest_store(manifest))  # fmt: skip
    # only receipts of RECEIPTED operations: a retry that later receipts a FAILED or APPLIED
    # operation of this run must not change what this seal covers
    count, head, _ = chain(sink, [o.operation_id for o in ops if o.state.value == "RECEIPTED"])
    earlier = run_receipts(sink, prefix)  # the receipt this one follows (a failed attempt's)
    return {
        "manifest_sha256": sha256(manifest) if manifest is not None else None,
        "parquet_key": parquet_key, "parquet_sha256": parquet_sha,
        "operations": {"count": count, "chain_sha256": head, "over": "RECEIPTED"},
        "previous_receipt_sha256": sha256(earlier[-1][1]) if earlier else None,
        **({"dataset_key": part.key, "dataset_sha256": part.sha256} if part else {}),
    }  # fmt: skip


def _manifest_store(manifest: bytes | None) -> str | None:
    """The store the run's manifest names (``store_identity``), for the dataset's column."""
    try:
        found = json.loads(manifest or b"{}").get("store_identity")
    except (ValueError, AttributeError):  # a manifest that is no JSON object: no store said
        return None
    return found if isinstance(found, str) else None


def sealed(receipt: dict[str, Any]) -> dict[str, Any]:
    """The receipt with its digest (call last, after every other field is set)."""
    return {**receipt, "digest": receipt_digest(receipt)}


def counts_from_rows(rows: Iterable[dict[str, Any]], *, legacy: bool = False) -> dict[str, int]:
    """The change counts the rows support; ``failed`` counts records as ``journal_counts``
    does (a failed replacement write is none, a supersede waiting on it is one), or, with
    ``legacy``, every FAILED operation, as receipts sealed before audit 49vii counted."""
    rows = list(rows)
    write = ("FAILED", "write_replacement")
    unwritten = {r.get("record_id") for r in rows if (r["state"], r.get("action")) == write}
    out: Counter[str] = Counter()
    for r in rows:
        if r["state"] in ("APPLIED", "RECEIPTED") and r.get("outcome") in _COUNT_OF:
            out[_COUNT_OF[r["outcome"]]] += 1
        elif r["state"] == "FAILED" and not deferral(r.get("reason_codes") or []):
            out["failed"] += legacy or r.get("action") != "write_replacement"
        elif r["state"] == "PLANNED" and not legacy and r.get("action") == "supersede":
            out["failed"] += r.get("replacement_id") in unwritten
    return {k: out.get(k, 0) for k in CHANGES}


def read_rows(sink: ReceiptSink, key: str | None) -> tuple[bytes | None, list[dict[str, Any]]]:
    body = sink.get(key) if key else None
    return body, (pq.read_table(io.BytesIO(body)).to_pylist() if body else [])


# every column a check reads by name (deferrals and verify_run read action and replacement_id)
_ROW_COLUMNS = {
    "operation_id", "record_id", "state", "outcome", "reason_codes", "action", "replacement_id",
}  # fmt: skip


def _read_rows(
    sink: ReceiptSink, key: str | None, v: Any
) -> tuple[bytes | None, list[dict[str, Any]]]:
    """``read_rows``, but a Parquet that does not read (or lacks the operation columns) is
    PARQUET_UNREADABLE, with its key, and no rows: the other checks go on."""
    body = sink.get(key) if key else None
    if not body:
        return body, []
    try:
        table = pq.read_table(io.BytesIO(body))
        if not _ROW_COLUMNS <= set(table.column_names):
            raise ValueError("operation columns missing")
        return body, table.to_pylist()
    except Exception as exc:  # noqa: BLE001 - any malformed file is a finding, not a crash
        v.problem("PARQUET_UNREADABLE", key=key, error=type(exc).__name__)
        return body, []


def _counts(receipt: dict[str, Any], key: str, v: Any) -> dict[str, Any]:
    counts = receipt.get("counts", {})
    if isinstance(counts, dict) and all(isinstance(n, int) for n in counts.values()):
        return counts
    v.problem("RECEIPT_COUNTS_INVALID", key=key)
    return {}


def verify_evidence(sink: ReceiptSink, run: Any, v: Any) -> list[dict[str, Any]]:
    """The checks the bucket alone allows; problems go to ``v``; returns the Parquet rows of
    the run's result (its completed receipt, else its last sealed one).

    Every receipt of the run is checked, in order: only a ``failure`` may be followed by
    another receipt, each names this run, a sealed later receipt names the digest of the
    one before it (``previous_receipt_sha256``; receipts sealed before that field are
    accepted without it) and keeps every operation an earlier one sealed as RECEIPTED, with
    counts at least theirs (COMPLETION_DROPS_OPERATIONS). Malformed evidence (a receipt,
    manifest or Parquet that does not parse) is a problem naming its key, never a crash.
    ``v.sealed_by`` is set to which receipt of the run (1-based) sealed those rows."""
    versions = getattr(sink, "overwritten", None)  # S3: a later version over the evidence
    try:
        for key in (versions(f"{run.prefix}/") or []) if versions is not None else []:
            v.problem("EVIDENCE_OVERWRITTEN", key=key)
    except ReceiptReadError as exc:  # throttled: unchecked is a finding, never "verified"
        v.problem("EVIDENCE_UNREADABLE", key=exc.key, error=exc.code)
    manifest_body = sink.get(f"{run.prefix}/manifest.json")
    manifest = loads(manifest_body)
    if manifest_body is None:
        v.problem("MANIFEST_MISSING", key=f"{run.prefix}/manifest.json")
    elif manifest is None:
        v.problem("MANIFEST_UNREADABLE", key=f"{run.prefix}/manifest.json")
    elif manifest.get("run_id") != run.run_id:
        v.problem("MANIFEST_RUN_ID_MISMATCH", run_id=str(manifest.get("run_id")))
    found = run_receipts(sink, run.prefix)
    if not found:
        v.problem("RUN_RECEIPT_MISSING")
        unnamed_parquet(sink, run.prefix, set(), v)
        return []
    result: list[dict[str, Any]] = []
    seals: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []  # evidence_dataset.Seal
    known: set[str] = set()
    named: set[str] = set()  # the Parquet keys the receipts name
    completed: str | None = None  # the key of the receipt that completed the run
    previous: bytes | None = None
    receipted_before: dict[str, str] = {}  # operation id -> the receipt that sealed it so
    counts_before: dict[str, tuple[int, str]] = {}  # count -> (highest so far, its receipt)
    for n, (key, body) in enumerate(found, 1):
        receipt = loads(body)
        if receipt is None:
            v.problem("RECEIPT_UNREADABLE", key=key)
            previous = body
            continue
        if completed is not None:
            v.problem("RECEIPT_AFTER_COMPLETION", key=key, after=completed,
                      status=str(receipt.get("status")))  # fmt: skip
        if receipt.get("run_id") != run.run_id:
            v.problem("RECEIPT_RUN_ID_MISMATCH", key=key, run_id=str(receipt.get("run_id")))
        # the run writes both from one context: a manifest saying otherwise is not the run's
        # (one planted before the night was sealed as its own until audit 49g)
        said = manifest or {}
        for f in _RUN_SAYS:
            if f in receipt and f in said and receipt[f] != said[f]:
                v.problem("MANIFEST_FIELD_MISMATCH", key=key, field=f)
        ev = receipt.get("evidence")
        if ev is not None and not isinstance(ev, dict):
            v.problem("RECEIPT_UNREADABLE", key=key, error="evidence")
            ev = {}
        if isinstance(ev, dict) and "previous_receipt_sha256" in ev:
            expected = sha256(previous) if previous is not None else None
            if ev["previous_receipt_sha256"] != expected:
                v.problem("RECEIPT_CHAIN_MISMATCH", key=key)
        previous = body
        if receipt.get("status") == "failure" and ev is None:
            if seals:  # a failure that seals nothing comes before any seal, never after one
                v.problem("EVIDENCE_UNSEALED", key=key, after="a sealed receipt")
            continue  # this attempt could not finish: it sealed nothing
        if isinstance(ev, dict) and "digest" in receipt:
            if isinstance(ev.get("parquet_key"), str):
                named.add(ev["parquet_key"])
        else:
            named.add(f"{run.prefix}/operations.parquet")  # sealed before evidence existed
        counts = _counts(receipt, key, v)
        try:
            rows = _verify_receipt(sink, run, receipt, counts, v)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            v.problem("RECEIPT_UNREADABLE", key=key, error=type(exc).__name__)
            rows = []
        if isinstance(ev, dict):
            seals.append((ev, rows))
        _keeps_earlier(key, rows, counts, receipted_before, counts_before, v)
        if completed is None:  # what a receipt after the completed one lists proves nothing
            known.update(r["operation_id"] for r in rows)
            result, v.sealed_by = rows, n
            if receipt.get("status") not in FOLLOWED:
                completed = key
    unnamed_parquet(sink, run.prefix, named, v)
    verify_dataset(sink, run, seals, result, v)
    # a receipt that claims this run but is not in it (F4: fetched in parallel)
    own = {operation_key(oid) for oid in known}  # a copy under another key is another claim
    others = [k for k in sink.list("operations/") if k not in own]
    for key, other in zip(others, fetch_listed(sink, others, v), strict=True):
        doc = loads(other) or {}
        if doc.get("run_id") == run.run_id:
            oid = key.rsplit("/", 1)[-1].removesuffix(".json")
            v.problem("RECEIPT_NOT_IN_RUN", operation_id=oid, record_id=doc.get("record_id"))
    return result


def _keeps_earlier(
    key: str, rows: Sequence[dict[str, Any]], counts: dict[str, Any],
    receipted_before: dict[str, str], counts_before: dict[str, tuple[int, str]], v: Any,
) -> None:  # fmt: skip
    """A later seal of the run (a rerun's, from the same journal) covers every operation an
    earlier seal had RECEIPTED (a receipted change is never undone) and counts at least as
    many changes: a forged completion that drops them is COMPLETION_DROPS_OPERATIONS.
    ``failed`` may fall (a rerun completes failures), no other count may."""
    mine = {r["operation_id"] for r in rows if r.get("state") == "RECEIPTED"}
    for oid, earlier in receipted_before.items():
        if oid not in mine:
            v.problem("COMPLETION_DROPS_OPERATIONS", key=key, operation_id=oid, after=earlier)
    for k in CHANGES:
        if k == "failed":
            continue
        n = counts.get(k, 0)
        high, earlier = counts_before.get(k, (0, ""))
        if n < high:
            v.problem("COMPLETION_DROPS_OPERATIONS", key=key, count=k, receipt=str(n),
                      after=earlier, earlier=str(high))  # fmt: skip
        elif n > high:
            counts_before[k] = (n, key)
    for oid in mine:
        receipted_before.setdefault(oid, key)


def _verify_receipt(
    sink: ReceiptSink, run: Any, receipt: dict[str, Any], counts: dict[str, Any], v: Any
) -> list[dict[str, Any]]:
    """One sealed receipt: digest, manifest, Parquet, operation receipts, counts."""
    ev = receipt.get("evidence")
    if not isinstance(ev, dict) or "digest" not in receipt:
        v.problem("EVIDENCE_UNSEALED")
        body, rows = _read_rows(sink, f"{run.prefix}/operations.parquet", v)
        return rows
    if receipt_digest(receipt) != receipt["digest"]:
        v.problem("RECEIPT_DIGEST_MISMATCH")
    manifest = sink.get(f"{run.prefix}/manifest.json")
    if manifest is None or sha256(manifest) != ev.get("manifest_sha256"):
        v.problem("MANIFEST_DIGEST_MISMATCH")
    parquet_key = ev.get("parquet_key") if isinstance(ev.get("parquet_key"), str) else None
    body, rows = _read_rows(sink, parquet_key, v)
    if parquet_key and body is None:
        v.problem("OPERATIONS_PARQUET_MISSING", key=parquet_key)
    elif body is not None and sha256(body) != ev.get("parquet_sha256"):
        v.problem("PARQUET_DIGEST_MISMATCH", key=parquet_key)
    changed = sum(counts.get(k, 0) for k in CHANGES if k != "failed")
    if not parquet_key and changed:
        v.problem("OPERATIONS_PARQUET_MISSING")
    sealed_ops = ev.get("operations")
    ops: dict[str, Any] = sealed_ops if isinstance(sealed_ops, dict) else {}
    receipted = [r["operation_id"] for r in rows if r["state"] == "RECEIPTED"]
    count, head, bodies = chain(sink, receipted)
    if (count, head) != (ops.get("count"), ops.get("chain_sha256")) and ops.get("over") is None:
        # sealed before "over": the chain covered every receipt there was, whatever its state
        count, head, _ = chain(sink, [r["operation_id"] for r in rows])
    if (count, head) != (ops.get("count"), ops.get("chain_sha256")):
        v.problem("OPERATIONS_DIGEST_MISMATCH")
    later = [r["operation_id"] for r in rows if r["state"] != "RECEIPTED"]
    bodies.update({oid: b for oid, b in zip(later, fetch_all(sink, [operation_key(o) for o in later]),
                                            strict=True) if b is not None})  # fmt: skip
    for r in rows:
        oid = r["operation_id"]
        if r["state"] == "RECEIPTED" and oid not in bodies:
            v.problem("OPERATION_RECEIPT_MISSING", operation_id=oid, record_id=r["record_id"])
            continue
        if oid in bodies:
            doc = loads(bodies[oid])
            if doc is None:
                v.problem("RECEIPT_UNREADABLE", key=operation_key(oid), operation_id=oid)
                continue
            # an operation receipted after the seal (a retry) may differ in its outcome only
            skip = () if r["state"] == "RECEIPTED" else ("outcome",)
            # the policy that authorised the change: only the chain's digest held it, so an
            # edit was OPERATIONS_DIGEST_MISMATCH naming no receipt
            wrong = [f for f in ("policy_version",) if doc.get(f) != r.get(f)]
            for field_name in [*_mismatched(doc, r, skip), *wrong]:
                v.problem(
                    "RECEIPT_FIELD_MISMATCH", operation_id=oid, field=field_name, against="parquet"
                )
    expected = counts_from_rows(rows) if body is not None or not parquet_key else None
    if expected is not None and not _unreadable(v, parquet_key):
        legacy = counts_from_rows(rows, legacy=True)["failed"]  # sealed before audit 49vii
        for k in CHANGES:
            if k == "failed" and counts.get(k, 0) == legacy:
                continue
            if counts.get(k, 0) != expected[k]:
                v.problem("COUNTS_MISMATCH", count=k, receipt=str(counts.get(k)),
                          operations=str(expected[k]))  # fmt: skip
    return rows


def _unreadable(v: Any, key: str | None) -> bool:
    """Whether ``key`` was reported PARQUET_UNREADABLE (its counts cannot be checked)."""
    return any(p.get("code") == "PARQUET_UNREADABLE" and p.get("key") == key for p in v.problems)


def _mismatched(doc: dict[str, Any], row: dict[str, Any], skip: Sequence[str] = ()) -> list[str]:
    out = [f for f, col in FIELDS
           if f not in skip and _norm(doc.get(f)) != _norm(row.get(col))
           and not _other_form(f, doc.get(f), row.get(col))]  # fmt: skip
    scope = doc.get("scope")
    scope = scope if isinstance(scope, dict) else {}  # of the wrong type: a mismatch, named
    if (scope.get("actor_id"), scope.get("namespace")) != (
        row.get("actor_id"),
        row.get("namespace"),
    ):
        out.append("scope")
    return out


def _other_form(field_name: str, a: Any, b: Any) -> bool:
    """A content hash written plain by an attempt before keys (evidence_key.py) and keyed by
    its rerun's seal: the bucket alone cannot compare them (verify with the store compares
    each with the journal)."""
    if field_name != "content_sha256" or not isinstance(a, str) or not isinstance(b, str):
        return False
    if a.startswith(KEYED) == b.startswith(KEYED):
        return False
    plain, other = (b, a) if a.startswith(KEYED) else (a, b)
    # the plain form is a sha256 and the keyed one a keyed sha256: anything else is an edit
    return bool(_SHA256.fullmatch(plain)) and bool(_SHA256.fullmatch(other[len(KEYED) :]))


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _norm(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value


def _when(value: Any) -> datetime | None:
    """An aware UTC datetime from a datetime or an ISO string; None when there is none."""
    if value is None:
        return None
    try:
        when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
