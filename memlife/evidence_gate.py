"""The gate verdict that approved a night's changes, kept before the commit (audit 50j).

The run receipt is written last. A night killed after its commit and before its receipt was
sealed by its rerun with the gate the rerun computed on the store the killed attempt had
already changed (nothing left to propose, other cases, other ``before`` figures): the
verdict under which the changes were committed was recorded nowhere (audit 50a). So before
the first change the gate approved, the verdict is written create-only beside the night's
receipts, ``runs/.../{run_id}/gate.json``: ``run_id``, ``gate`` (the verdict, the same
content-free section a receipt carries) and ``mac`` (HMAC-SHA256 under the store's run
secret, as content hashes are keyed: memlife/evidence_key.py). A rerun finds it and
reports it as the night's gate (its own re-evaluation beside it as ``gate_rerun`` when it
differs); the receipt's ``evidence`` names it (``gate_key``, ``gate_sha256``) and
``receipts verify`` checks it (:func:`verify_gate`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

from memlife.audit import ReceiptSink, dumps
from memlife.run_receipts import completed_status, loads, run_receipts
from memlife.run_types import RunContext

FIELDS = frozenset({"run_id", "gate", "mac"})  # what the file holds: nothing else


def gate_key(prefix: str) -> str:
    return f"{prefix}/gate.json"


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, default=str, separators=(",", ":")).encode()


def verdict_mac(run_id: str, gate: Any, secret: bytes) -> str:
    """The file's MAC: binds the verdict to the run and to the store that wrote it."""
    body = _canonical({"run_id": run_id, "gate": gate})
    return "hmac-sha256:" + hmac.new(secret, body, hashlib.sha256).hexdigest()


@dataclass
class KeptGate:
    """The night's gate (the kept verdict), this attempt's own where it differs, and the
    evidence that names the file."""

    gate: dict[str, Any]
    rerun: dict[str, Any] | None
    key: str
    sha256: str

    def evidence(self) -> dict[str, Any]:
        return {"gate_key": self.key, "gate_sha256": self.sha256}


def keep_verdict(ctx: RunContext, verdict: dict[str, Any] | None, secret: bytes) -> KeptGate | None:
    """Before the commit: keep ``verdict`` (create-only), or find the one an earlier attempt
    of this run kept. None where nothing is committed (a dry run, no verdict, a rerun of a
    completed run: run_commit.commit_run). A file that is not this run's verdict (its MAC,
    run id or fields wrong) is never reported as the night's gate: this attempt's verdict
    is, and the receipt names the file so that ``verify`` reports it."""
    if ctx.config.dry_run or verdict is None:
        return None
    if completed_status(ctx.sink, ctx.prefix) is not None:
        return None
    key = gate_key(ctx.prefix)
    own = json.loads(dumps(verdict))  # as a reader of the file gets it back
    doc = {"run_id": ctx.run_id, "gate": own, "mac": verdict_mac(ctx.run_id, own, secret)}
    body = dumps(doc)
    if ctx.sink.put_new(key, body):
        return KeptGate(verdict, None, key, hashlib.sha256(body).hexdigest())
    found = ctx.sink.get(key) or b""
    kept = loads(found)
    sha = hashlib.sha256(found).hexdigest()
    if kept is None or _wrong(kept, ctx.run_id, secret):
        return KeptGate(verdict, None, key, sha)
    night = kept["gate"]
    return KeptGate(night, None if _canonical(night) == _canonical(own) else verdict, key, sha)


def _wrong(doc: dict[str, Any], run_id: str, secret: bytes | None) -> list[str]:
    """What makes ``doc`` not this run's kept verdict (problem codes)."""
    out = []
    if set(doc) != FIELDS or not isinstance(doc.get("gate"), dict):
        out.append("GATE_VERDICT_FIELDS")  # more than the verdict: content may have been added
    if doc.get("run_id") != run_id:
        out.append("GATE_VERDICT_RUN_ID_MISMATCH")
    mac = doc.get("mac")
    if secret is not None and (
        not isinstance(mac, str)
        or not hmac.compare_digest(mac, verdict_mac(run_id, doc.get("gate"), secret))
    ):
        out.append("GATE_VERDICT_MAC_MISMATCH")
    return out


_CHANGES = ("consolidated", "superseded", "deleted", "quarantined")


def verify_gate(sink: ReceiptSink, run: Any, v: Any, secret: bytes | None = None) -> None:
    """Each receipt of the run that names a kept verdict (``evidence.gate_key``, written
    since audit 50j; receipts before it and failure receipts name none): the file is there
    (GATE_VERDICT_MISSING), the bytes the receipt sealed (GATE_VERDICT_DIGEST_MISMATCH),
    only the run id, the verdict and its MAC (GATE_VERDICT_FIELDS), this run's
    (GATE_VERDICT_RUN_ID_MISMATCH), the verdict the receipt reports as the night's gate
    (GATE_VERDICT_MISMATCH) and, with the store's ``secret``, its MAC
    (GATE_VERDICT_MAC_MISMATCH). A receipt that counts changes under a configured gate and
    names no kept verdict is GATE_VERDICT_MISSING too."""
    for rkey, body in run_receipts(sink, run.prefix):
        receipt = loads(body) or {}
        ev = receipt.get("evidence")
        if not isinstance(ev, dict) or "gate_key" not in ev:
            continue
        key = ev.get("gate_key")
        gate = receipt.get("gate")
        if key is None:
            counts = receipt.get("counts")
            changed = isinstance(counts, dict) and any(counts.get(k) for k in _CHANGES)
            if isinstance(gate, dict) and gate.get("configured", True) and changed:
                v.problem("GATE_VERDICT_MISSING", key=rkey)
            continue
        if key != gate_key(run.prefix):
            v.problem("GATE_VERDICT_RUN_ID_MISMATCH", key=str(key), receipt=rkey)
            continue
        found = sink.get(key)
        if found is None:
            v.problem("GATE_VERDICT_MISSING", key=key, receipt=rkey)
            continue
        if hashlib.sha256(found).hexdigest() != ev.get("gate_sha256"):
            v.problem("GATE_VERDICT_DIGEST_MISMATCH", key=key, receipt=rkey)
        doc = loads(found)
        if doc is None:
            v.problem("RECEIPT_UNREADABLE", key=key)
            continue
        for code in _wrong(doc, run.run_id, secret):
            v.problem(code, key=key)
        if _canonical(doc.get("gate")) != _canonical(gate):
            v.problem("GATE_VERDICT_MISMATCH", key=key, receipt=rkey)
