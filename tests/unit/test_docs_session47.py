"""Session 47 (audit 47c): what README.md and docs/*.md promise a user who follows them
literally, held against what the real CLI does on the embedded SQLite store.

- docs/evaluation.md ("Recall, as the gate sees it"; `memlife eval --cases FILE` "runs a set
  on demand against the store as it is"): the gate's recall is "the same ranking as online
  recall"; README: "Recall never returns a record past its `expires_at`". `memlife eval`
  still counted such a record as retrieved.
- docs/receipts.md ("The service identity"): every manual run (`erase`, ...) names who
  asked in `reviewer_identity`; the deferral receipt of an erasure a legal hold deferred
  named nobody.
- README ("Types"): a `type: ignore[code]` is kept only where a comment on its line says why.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.ledger import AccessLedger
from memlife.model import MemoryType
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import ACTOR, NOW, rec, write_cases
from tests.support.records import good

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
ROUTER = "To reset the router: unplug it, wait 30 seconds, plug it back in."
QUERY = "How do I reset the router?"


def _online_ids(home: Path) -> list[str]:
    store = SqliteStore(home / "memlife.db")
    memory = LongTermMemory(store, ledger=AccessLedger(home / "eval-ledger", flush_seconds=None))
    try:
        return [h.record.id for h in memory.recall(ACTOR, QUERY, k=5, log=False)]
    finally:
        memory.close()
        store.close()


def test_memlife_eval_never_serves_what_online_recall_hides(home: Path, tmp_path: Path) -> None:
    """A procedure is past its `expires_at`, and no night has deleted it yet. Online recall
    never returns it; `memlife eval` must see the store as online recall does: a case that
    needs the procedure fails (exit 1), and a case forbidding it finds no forbidden hit."""
    store = SqliteStore(home / "memlife.db")
    store.put_many([
        rec("m-router", "procedures", ROUTER, subject="router_reset",
            mtype=MemoryType.procedural, expires=NOW - timedelta(days=30)),
        rec("m-dog", "facts", "Has a dog named Rex.", subject="pet"),
    ])  # fmt: skip
    store.close()
    assert "m-router" not in _online_ids(home)  # what the agent gets: nothing of it
    cases = write_cases(tmp_path / "cases.yaml", [
        {"id": "kept", "query": QUERY, "actor_id": ACTOR, "must_retrieve": ["m-router"],
         "impact": "high"},
        {"id": "gone", "kind": "expired_fact", "query": QUERY, "actor_id": ACTOR,
         "forbidden": ["m-router"]},
    ])  # fmt: skip

    res = runner.invoke(app, ["eval", "--cases", cases, "--json"])

    results = {r["id"]: r for r in json.loads(res.stdout)["results"]}
    assert "m-router" not in results["kept"]["retrieved"], results["kept"]
    assert results["gone"]["forbidden_hits"] == []
    assert res.exit_code == 1  # the high-impact case fails, as it fails online


def test_a_deferral_receipt_names_who_asked_for_the_erasure(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator asks to erase a record under a legal hold: the erasure is deferred, and
    its only per-record evidence is the deferral receipt. As every manual run's receipts do
    (docs/receipts.md), it must name who asked (MEMLIFE_OPERATOR)."""
    monkeypatch.setenv("MEMLIFE_OPERATOR", "ana (ticket DSR-7)")
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1", retention_class="legal_hold")) + "\n")
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0

    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json"])

    assert res.exit_code == 0, res.output
    run_id = json.loads(res.stdout)["run_id"]
    (manifest,) = (home / "receipts").rglob(f"runs/*/*/*/{run_id}/manifest.json")
    assert json.loads(manifest.read_text())["requested_by"] == "ana (ticket DSR-7)"
    (deferral,) = [json.loads(p.read_text()) for p in (home / "receipts").rglob("deferrals/*.json")]
    assert deferral["run_id"] == run_id and deferral["outcome"] == "deferred"
    assert deferral["reviewer_identity"] == "ana (ticket DSR-7)"


def test_a_deferral_receipt_is_written_for_the_held_record(home: Path, tmp_path: Path) -> None:
    """The held record's erasure is deferred, never done: the record stays, the deferral
    receipt names it and its scope (the evidence the xfail above reads)."""
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1", retention_class="legal_hold")) + "\n")
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0

    res = runner.invoke(app, ["erase", "--actor", "u-1", "--id", "m-1", "--yes", "--json"])

    assert res.exit_code == 0, res.output
    (deferral,) = [json.loads(p.read_text()) for p in (home / "receipts").rglob("deferrals/*.json")]
    assert (deferral["record_id"], deferral["action"]) == ("m-1", "erase")
    assert deferral["scope"] == {"actor_id": "u-1", "namespace": "/users/u-1/preferences"}
    assert deferral["outcome"] == "deferred" and deferral["service_identity"]
    store = SqliteStore(home / "memlife.db")
    try:
        assert store.get("m-1") is not None
    finally:
        store.close()


IGNORE = re.compile(r"#\s*type:\s*ignore\[[^\]]+\](.*)$")


def test_every_type_ignore_says_why_on_its_line() -> None:
    """README: "A `type: ignore[code]` is kept only where a comment on its line says why"."""
    bare = []
    for path in sorted([*(REPO / "memlife").rglob("*.py"), *(REPO / "flows").rglob("*.py")]):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = IGNORE.search(line)
            if m and not re.search(r"#\s*\S", m.group(1)):
                bare.append(f"{path.relative_to(REPO)}:{n}")
    assert bare == []
