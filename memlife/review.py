"""Receipt review for compliance: list runs, show one, verify evidence against the store.

`verify` cross-checks three independent sources: the receipts (S3 or files), the
operation journal and the store itself, and reports every mismatch by id and code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memlife.audit import ReceiptSink
from memlife.journal import Journal, OpKind, OpState
from memlife.receipts import operation_key
from memlife.stores import same_store, store_identity
from memlife.stores.base import MemoryStore


@dataclass
class RunInfo:
    run_id: str
    prefix: str
    manifest: dict[str, Any]
    receipt: dict[str, Any] | None

    @property
    def started_at(self) -> str:
        """From the manifest; from the receipt when the manifest is missing or unreadable."""
        return str(self.manifest.get("started_at") or (self.receipt or {}).get("started_at") or "")

    def as_json(self) -> dict[str, Any]:
        r = self.receipt or {}
        return {
            "run_id": self.run_id, "mode": self.manifest.get("mode"),
            "status": r.get("status", "incomplete"), "policy_version": self.manifest.get("policy_version"),
            "cutoff": self.manifest.get("cutoff"), "started_at": self.started_at,
            "counts": r.get("counts", {}), "location": self.prefix, "store": self.store,
        }  # fmt: skip

    @property
    def store(self) -> str | None:
        """The store the run ran on (``store_identity``); None in a manifest from before
        runs named it, or one missing or unreadable."""
        named = self.manifest.get("store_identity")
        return named if isinstance(named, str) and named else None


def latest_receipt(sink: ReceiptSink, prefix: str) -> dict[str, Any] | None:
    """The run's result: receipt.json, or the receipt.N.json with which a rerun completed a
    failed attempt. A receipt added after a completed one is not the result (``verify``
    reports it: RECEIPT_AFTER_COMPLETION)."""
    from memlife.run_receipts import effective_receipt, loads, run_receipts

    docs = [loads(body) or {} for _, body in run_receipts(sink, prefix)]
    return effective_receipt(docs)


# a run folder's own keys: the manifest, or a receipt (listed even when its manifest is gone:
# ``verify`` then reports MANIFEST_MISSING)
_RUN_KEY = re.compile(r"^(runs/\d{4}/\d{2}/\d{2}/[^/]+)/(?:manifest|receipt(?:\.\d+)?)\.json$")


# a run id names its cutoff day: nightly `YYYYmmddTHHMMSSZ-...`, manual `manual-YYYYmmddT...`
_ID_DAY = re.compile(r"^(?:manual-)?(\d{4})(\d{2})(\d{2})T")


def run_prefixes(keys: Iterable[str]) -> list[str]:
    """The run folders (``runs/yyyy/mm/dd/run_id``) that ``keys`` show, each once, sorted;
    only under the day the run id names (a run's folder is its cutoff's day): a copy of a
    run under another day, which a create-only bucket accepts, is no run's evidence
    (``misplaced_runs``; ``receipts verify``: RUN_FOLDER_MISPLACED)."""
    return sorted(p for p in _folders(keys) if in_place(p))


def _folders(keys: Iterable[str]) -> set[str]:
    return {m.group(1) for k in keys if (m := _RUN_KEY.match(k))}


def in_place(prefix: str) -> bool:
    """A run folder under the day its run id names (an id naming no day: any folder)."""
    _, yyyy, mm, dd, run_id = prefix.split("/", 4)
    m = _ID_DAY.match(run_id)
    return m is None or m.groups() == (yyyy, mm, dd)


def misplaced_runs(keys: Iterable[str], run_id: str | None = None) -> list[str]:
    """Run folders that ``keys`` show under another day than their run id's (of ``run_id``
    only, when given)."""
    return sorted(p for p in _folders(keys)
                  if not in_place(p) and run_id in (None, p.rsplit("/", 1)[1]))  # fmt: skip


def run_info(sink: ReceiptSink, prefix: str) -> RunInfo:
    """The run in ``prefix``; a manifest that is missing or not a JSON object reads as {}
    (``verify``: MANIFEST_MISSING / MANIFEST_UNREADABLE), never an exception."""
    from memlife.audit import ReceiptReadError
    from memlife.run_receipts import loads

    try:
        manifest = loads(sink.get(f"{prefix}/manifest.json")) or {}
        receipt = latest_receipt(sink, prefix)
    except ReceiptReadError:  # listed, not readable: `verify` names the key
        manifest, receipt = {}, {"status": "unreadable"}
    return RunInfo(prefix.rsplit("/", 1)[1], prefix, manifest, receipt)


def list_runs(sink: ReceiptSink, since: datetime | None = None) -> list[RunInfo]:
    runs = []
    for prefix in run_prefixes(sink.list("runs/")):
        run = run_info(sink, prefix)
        if since and run.started_at < since.isoformat():
            continue
        runs.append(run)
    runs.sort(key=lambda r: r.started_at)
    return runs


def find_run(sink: ReceiptSink, run_id: str) -> RunInfo | None:
    # run ids name their cutoff day: the run is in that day's folder, or nowhere (a copy
    # under another day is not it); an id naming no day is looked for everywhere
    if m := _ID_DAY.match(run_id):
        prefix = "runs/{}/{}/{}/{}".format(*m.groups(), run_id)
        return run_info(sink, prefix) if run_prefixes(sink.list(f"{prefix}/")) else None
    return next((r for r in list_runs(sink) if r.run_id == run_id), None)


@dataclass
class Verification:
    run_id: str
    operations: int = 0
    checked_records: int = 0
    problems: list[dict[str, str | None]] = field(default_factory=list)
    notes: list[dict[str, str | None]] = field(default_factory=list)  # informational only
    sealed_by: int = 0  # which of the run's receipts (1-based) sealed its result (evidence.py)

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem(self, code: str, **ids: str | None) -> None:
        self.problems.append({"code": code, **ids})

    def note(self, code: str, **ids: str | None) -> None:
        """A finding that is not a failure (e.g. RECORD_ID_REUSED): reported, ``ok`` kept."""
        self.notes.append({"code": code, **ids})

    def as_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "ok": self.ok, "operations": self.operations,
                "checked_records": self.checked_records, "problems": self.problems,
                "notes": self.notes}  # fmt: skip


_REMOVING = {OpKind.delete.value, OpKind.purge.value, OpKind.erase.value}


def _journaled_sha(journal: Journal | None) -> Callable[[str, object], str | None] | None:
    """(operation id, a receipt's content hash) -> the journal's, in the receipt's form."""
    if journal is None:
        return None
    from memlife.evidence_key import as_written

    secret = journal.run_secret()

    def sha(oid: str, written: object) -> str | None:
        op = journal.get(oid)
        return None if op is None else as_written(op.content_sha256, written, secret)

    return sha


def verify_run(sink: ReceiptSink, store: MemoryStore | None, journal: Journal | None, run_id: str,
               *, evidence_only: bool = False) -> Verification:  # fmt: skip
    """Evidence (digest, manifest, Parquet, operation receipts, counts; memlife/evidence.py),
    then, unless ``evidence_only``, the journal both ways and the store itself."""
    from memlife.audit import ReceiptReadError

    v = Verification(run_id)
    try:
        return _verify_run(sink, store, journal, run_id, v, evidence_only)
    except ReceiptReadError as exc:  # the evidence is there but does not read: named
        v.problem("EVIDENCE_UNREADABLE", key=exc.key, error=exc.code)
        return v


def _verify_run(sink: ReceiptSink, store: MemoryStore | None, journal: Journal | None,
                run_id: str, v: Verification, evidence_only: bool) -> Verification:  # fmt: skip
    from memlife.evidence import verify_evidence
    from memlife.evidence_deferrals import verify_deferrals
    from memlife.evidence_gate import verify_gate
    from memlife.evidence_journal import expiry, verify_journal

    run = find_run(sink, run_id)
    for copy in misplaced_runs(sink.list("runs/"), run_id):  # a second account of the run
        v.problem("RUN_FOLDER_MISPLACED", key=copy)
    if run is None:
        v.problem("RUN_NOT_FOUND")
        return v
    ops = verify_evidence(sink, run, v)
    verify_deferrals(sink, run_id, ops, v, None if evidence_only or store is None
                     else _journaled_sha(journal), run.manifest.get("requested_by"))  # fmt: skip
    # the gate verdict kept before the commit; its MAC with the store's secret (audit 50j)
    verify_gate(sink, run, v, None if evidence_only or journal is None else journal.run_secret())
    previous = (run.receipt or {}).get("previous_run")  # memlife/run_chain.py
    if isinstance(previous, str) and find_run(sink, previous) is None:
        v.problem("PREVIOUS_RUN_MISSING", previous_run=previous)
    v.operations = len(ops)
    if evidence_only or store is None:
        return v
    run_ops = journal.by_run(run_id) if journal is not None else []
    ran_on, here = run.manifest.get("store_identity"), getattr(store, "url", None)
    if ran_on and here and not same_store(str(ran_on), store_identity(here)) and not run_ops:
        # said, never instead of a finding: another store's run (one home, two stores) reads
        # as missing journal rows; a store moved since keeps them (no note), and one whose
        # rows went with the move or a tamper is checked in full all the same
        v.note("OTHER_STORE", run_store=str(ran_on), store=store_identity(here))
    # rows the DynamoDB journal's TTL may have dropped by now: expired, not missing
    expired = expiry(journal, run.manifest.get("started_at"))
    if journal is not None:
        finished_at = (run.receipt or {}).get("finished_at")
        verify_journal(ops, run_ops, sink, v, finished_at, v.sealed_by or 1,
                       journal.run_secret(), expired)  # fmt: skip
    secret = journal.run_secret() if journal is not None else b""
    for op in ops:
        oid, rid = op["operation_id"], op["record_id"]
        if sink.get(operation_key(oid)) is None:
            continue  # failed/queued (listed in the run receipt), or reported missing above
        journaled = journal.get(oid) if journal is not None else None
        gone = journaled is None and expired(op.get("action"))  # noted JOURNAL_EXPIRED
        if (
            journal is not None
            and not gone
            and (journaled is None or journaled.state is not OpState.RECEIPTED)
        ):
            v.problem("RECEIPT_WITHOUT_JOURNALED_CHANGE", operation_id=oid, record_id=rid)
        v.checked_records += 1
        if op.get("outcome") == "skipped":
            continue  # nothing changed (e.g. a replacement withdrawn because of an erasure)
        current = store.get(rid)
        later_removal = _removed_later(journal, op)
        if op["action"] in _REMOVING:
            if current is not None and _reused(current, op, secret):
                v.note("RECORD_ID_REUSED", operation_id=oid, record_id=rid)
            elif current is not None:
                v.problem("DELETED_RECORD_PRESENT", operation_id=oid, record_id=rid)
        elif current is None and not later_removal:
            # a superseded original, a replacement or a quarantined record vanished unreceipted
            v.problem("RECORD_MISSING_WITHOUT_RECEIPT", operation_id=oid, record_id=rid)
        elif current is not None and op["action"] == OpKind.supersede.value:
            if (
                current.status.value == "superseded"
                and not _handed_over(store, op["replacement_id"], current.provenance.replaced_by)
                and not _superseded_again(store, journal, rid, oid, current.provenance.replaced_by)
            ):
                v.problem("SUPERSEDE_MISMATCH", operation_id=oid, record_id=rid)
    return v


def _reused(current: Any, op: dict[str, Any], secret: bytes) -> bool:
    """The id was written again after the removal (deterministic ids: LangGraph's are
    sha256(actor, namespace, key)): the record now there was created after the operation
    was sealed AND holds other content than the one removed. The same content back under
    the id, whatever its created_at, is still DELETED_RECORD_PRESENT."""
    from memlife.evidence import _when
    from memlife.model import content_sha256

    removed_at, created = _when(op.get("updated_at")), _when(current.created_at)
    if removed_at is None or created is None or created <= removed_at:
        return False
    from memlife.evidence_key import as_written

    removed_sha = op.get("content_sha256")
    now_sha = as_written(content_sha256(current.content), removed_sha, secret)
    return removed_sha is not None and now_sha != removed_sha


def _removed_later(journal: Journal | None, op: dict[str, Any]) -> bool:
    """Whether a receipted removal explains ``op``'s record missing: one of this record (not
    one naming it as a replacement), of its actor and namespace, done after ``op`` was
    planned. Any removal of the id was taken once: another actor's erasure of its own
    record under that id, even one before ``op``, hid a record gone with no receipt at all
    (audit 53t: a held record vanished and verify said ok)."""
    if journal is None:
        return False
    oid, rid = op["operation_id"], op["record_id"]
    mine = journal.get(oid)
    since = mine.created_at if mine is not None else None
    return any(
        o.operation_id != oid
        and o.record_id == rid
        and (o.actor_id, o.namespace) == (op.get("actor_id"), op.get("namespace"))
        and o.kind.value in _REMOVING
        and o.state is OpState.RECEIPTED
        and (since is None or o.updated_at is None or o.updated_at >= since)
        for o in journal.for_record(rid)
    )


def _superseded_again(
    store: MemoryStore, journal: Journal | None, record_id: str, operation_id: str, now: str | None
) -> bool:
    """A receipted supersede of the record planned after this operation points it to
    ``now`` (down its own chain): put back active (``import --update``) and merged again by
    a later night, the record points where that supersede says, not down this one's."""
    mine = journal.get(operation_id) if journal is not None else None
    if journal is None or mine is None or mine.created_at is None:
        return False
    return any(
        o.kind is OpKind.supersede
        and o.state is OpState.RECEIPTED
        and o.created_at is not None
        and o.created_at > mine.created_at
        and _handed_over(store, o.replacement_id, now)
        for o in journal.for_record(record_id)
    )


def _handed_over(
    store: MemoryStore, replacement: str | None, now: str | None, hops: int = 32
) -> bool:
    """The record points to the run's ``replacement``, or to where it was handed over since:
    that replacement superseded in its turn (a later night's merge, a reviewer), down the
    chain of replacements to ``now`` (status._repoint moves the sources along)."""
    seen: set[str] = set()
    while replacement is not None and replacement not in seen and len(seen) < hops:
        if replacement == now:
            return True
        seen.add(replacement)
        rec = store.get(replacement)
        if rec is None or rec.status.value != "superseded":
            return False
        replacement = rec.provenance.replaced_by
    return False
