"""Audit 50m (session 50): mutation pass over audit 50j's kept gate verdict.

Each test kills a mutant of memlife/evidence_gate.py that the session's tests let live
(named in its docstring). The run folder is a real FileSink; ``keep_verdict`` and
``verify_gate`` are called as the pipeline and ``receipts verify`` call them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# -- keep_verdict and verify_gate on a real FileSink (no night needed) ----------------------

PREFIX = "runs/2026/06/01/20260601T000000Z-apply-0000000000"
RUN_ID = "20260601T000000Z-apply-0000000000"
SECRET = b"k" * 32


def _ctx(tmp_path: Path) -> Any:
    from types import SimpleNamespace

    from memlife.audit import FileSink

    config = SimpleNamespace(dry_run=False)
    return SimpleNamespace(config=config, sink=FileSink(tmp_path), prefix=PREFIX, run_id=RUN_ID)


def _verdict(cases: int = 3) -> dict[str, Any]:
    return {"configured": True, "status": "pass", "cases": cases, "proposed_deletions": 1}


def test_a_rerun_whose_verdict_equals_the_kept_one_reports_no_second_verdict(
    tmp_path: Path,
) -> None:
    """An attempt killed after keeping its verdict and before its commit: the rerun's own
    verdict is the same. Must hold: the rerun reports the night's gate alone (no
    ``gate_rerun`` beside it); one that differs is reported beside it. Kills the mutant that
    always set ``rerun``."""
    from memlife.evidence_gate import keep_verdict

    ctx = _ctx(tmp_path)
    first = keep_verdict(ctx, _verdict(), SECRET)
    assert first is not None and first.gate == _verdict() and first.rerun is None
    again = keep_verdict(ctx, _verdict(), SECRET)
    assert again is not None and again.gate == _verdict() and again.rerun is None
    assert again.sha256 == first.sha256
    other = keep_verdict(ctx, _verdict(cases=2), SECRET)
    assert other is not None and other.gate == _verdict() and other.rerun == _verdict(cases=2)


def test_a_completed_run_keeps_no_verdict(tmp_path: Path) -> None:
    """A rerun of a completed run commits nothing (run_commit.commit_run). Must hold: no
    gate.json is written after the fact for it (a run completed before audit 50j has none).
    Kills the mutant of ``keep_verdict`` without its ``completed_status`` check."""
    from memlife.evidence_gate import gate_key, keep_verdict
    from memlife.run_receipts import completed_status

    ctx = _ctx(tmp_path)
    assert ctx.sink.put_new(f"{PREFIX}/receipt.json", json.dumps({"status": "success"}).encode())
    assert completed_status(ctx.sink, PREFIX) == "success"
    assert keep_verdict(ctx, _verdict(), SECRET) is None
    assert ctx.sink.get(gate_key(PREFIX)) is None


def test_a_kept_file_with_a_wrong_mac_is_not_reported_as_the_nights_gate(
    tmp_path: Path,
) -> None:
    """A gate.json planted or rewritten with a looser verdict (MAC not the store's). Must
    hold: this attempt's verdict is reported, not the planted one. Kills the mutant that
    trusted any readable file (``_wrong`` not consulted)."""
    from memlife.evidence_gate import gate_key, keep_verdict

    ctx = _ctx(tmp_path)
    planted = {"run_id": RUN_ID, "gate": _verdict(cases=0), "mac": "hmac-sha256:" + "0" * 64}
    assert ctx.sink.put_new(gate_key(PREFIX), json.dumps(planted).encode())
    kept = keep_verdict(ctx, _verdict(), SECRET)
    assert kept is not None and kept.gate == _verdict() and kept.rerun is None


class _Problems:
    def __init__(self) -> None:
        self.codes: set[str] = set()

    def problem(self, code: str, **_: Any) -> None:
        self.codes.add(code)


def _verify_doc(tmp_path: Path, receipt: dict[str, Any], gate_doc: bytes | None = None) -> set[str]:
    from types import SimpleNamespace

    from memlife.audit import FileSink
    from memlife.evidence_gate import gate_key, verify_gate

    sink = FileSink(tmp_path)
    if gate_doc is not None:
        assert sink.put_new(gate_key(PREFIX), gate_doc)
    assert sink.put_new(f"{PREFIX}/receipt.json", json.dumps(receipt).encode())
    v = _Problems()
    verify_gate(sink, SimpleNamespace(prefix=PREFIX, run_id=RUN_ID), v, SECRET)
    return v.codes


def _kept(gate: Any, **change: Any) -> tuple[bytes, str]:
    import hashlib

    from memlife.evidence_gate import verdict_mac

    doc = {"run_id": RUN_ID, "gate": gate, "mac": verdict_mac(RUN_ID, gate, SECRET), **change}
    body = json.dumps(doc).encode()
    return body, hashlib.sha256(body).hexdigest()


def _receipt_naming(sha: str, gate: Any, key: str = f"{PREFIX}/gate.json") -> dict[str, Any]:
    return {"status": "success", "gate": gate, "counts": {"deleted": 1},
            "evidence": {"gate_key": key, "gate_sha256": sha}}  # fmt: skip


def test_control_verify_passes_a_kept_verdict_as_written(tmp_path: Path) -> None:
    body, sha = _kept(_verdict())
    assert _verify_doc(tmp_path, _receipt_naming(sha, _verdict()), body) == set()


def test_verify_reports_each_way_a_kept_verdict_is_wrong(tmp_path: Path) -> None:
    """Each problem verify_gate names, one file at a time (the session's tests reach them
    only together, through one tampered night). Kills the mutants that dropped the field
    check, the verdict-is-an-object check, the run id check, the digest check, the
    receipt-gate comparison and the folder check."""
    cases: list[tuple[str, bytes, str, dict[str, Any]]] = []
    body, sha = _kept(_verdict(), note="content")  # a field beyond the verdict
    cases.append(("GATE_VERDICT_FIELDS", body, sha, _verdict()))
    body, sha = _kept([1])  # the verdict is no object
    cases.append(("GATE_VERDICT_FIELDS", body, sha, [1]))  # type: ignore[arg-type]
    body, sha = _kept(_verdict(), run_id="20260602T000000Z-apply-0000000000")
    cases.append(("GATE_VERDICT_RUN_ID_MISMATCH", body, sha, _verdict()))
    body, _ = _kept(_verdict())
    cases.append(("GATE_VERDICT_DIGEST_MISMATCH", body, "0" * 64, _verdict()))
    body, sha = _kept(_verdict())
    cases.append(("GATE_VERDICT_MISMATCH", body, sha, _verdict(cases=9)))
    for i, (code, body, sha, gate) in enumerate(cases):
        found = _verify_doc(tmp_path / str(i), _receipt_naming(sha, gate), body)
        assert code in found, (code, found)
    body, sha = _kept(_verdict())
    elsewhere = "runs/2026/06/02/20260602T000000Z-apply-0000000000/gate.json"
    found = _verify_doc(tmp_path / "other", _receipt_naming(sha, _verdict(), elsewhere), body)
    assert "GATE_VERDICT_RUN_ID_MISMATCH" in found


def test_a_receipt_counting_changes_under_a_gate_must_name_a_kept_verdict(
    tmp_path: Path,
) -> None:
    """A receipt whose ``evidence.gate_key`` is null though it counts changes (deleted,
    superseded, quarantined or consolidated) under a configured gate (a gate section with
    no ``configured`` flag counts as configured). Must hold: GATE_VERDICT_MISSING; with no
    change counted, or no gate configured, none. Kills the mutants that narrowed
    ``_CHANGES``, read a missing ``configured`` as false, or counted every receipt."""
    base = {"status": "success", "evidence": {"gate_key": None}}
    for i, change in enumerate(("consolidated", "superseded", "deleted", "quarantined")):
        for j, gate in enumerate(({"configured": True}, {"status": "pass"})):
            receipt = {**base, "gate": gate, "counts": {change: 2}}
            found = _verify_doc(tmp_path / f"{i}-{j}", receipt)
            assert "GATE_VERDICT_MISSING" in found, (change, gate)
    quiet = {**base, "gate": {"configured": True}, "counts": {"deleted": 0, "kept": 5}}
    assert _verify_doc(tmp_path / "quiet", quiet) == set()
    off = {**base, "gate": {"configured": False}, "counts": {"deleted": 2}}
    assert _verify_doc(tmp_path / "off", off) == set()
