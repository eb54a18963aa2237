"""Evidence across nights (session 42, audit g; found on LoCoMo memories, kept here on a
few plain ones so they run wherever the data is not). Two apply nights at one cutoff (the same run id) with the
store changed between them: the second is a rerun of a completed run, and nothing may follow
its completed receipt (``run_receipts.completed_receipt``). And a record a night superseded,
put back by `import --update` and merged again by a later night: the first night's
evidence must still verify."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from memlife.ledger import AccessLedger
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.lifecycle import snapshot
from tests.unit.test_nights_locomo_session42 import NIGHT1, iso, ok


def _background(tmp_path: Path) -> None:
    """A few unrelated facts of the actor, imported as an agent saves them."""
    facts = ("Nate plays video games on weekends.", "Nate adopted a turtle last spring.",
             "Joanna writes screenplays.")  # fmt: skip
    lines = [{"id": f"bg-{i}", "actor_id": "conv-42",
              "namespace": f"/conversations/conv-42/{t.split()[0].lower()}",
              "memory_type": "semantic", "content": t, "created_at": iso(NIGHT1 - timedelta(days=60)),
              "source": "agent_inferred", "confidence": 0.8} for i, t in enumerate(facts)]  # fmt: skip
    (tmp_path / "background.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    ok("import", str(tmp_path / "background.jsonl"))


def test_a_second_night_at_one_cutoff_changes_nothing_its_receipt_does_not_seal(
    home: Path, tmp_path: Path
) -> None:
    """The adversary runs the night, imports a record already past its ``expires_at`` into
    an enforced namespace, and runs the night again with the same ``--now``. The second
    run is the first one's run id, whose receipt is sealed: it must change nothing (the
    next night deletes the record with its own receipt), or `receipts verify` of the run
    must still pass."""
    _background(tmp_path)
    night = ("run", "--engine", "local", "--now", iso(NIGHT1), "--allow-future-cutoff", "--json")
    first = json.loads(ok(*night))
    late = {"id": "late-1", "actor_id": "conv-42", "namespace": "/users/conv-42/facts",
            "memory_type": "semantic", "content": "Nate has a dentist appointment on Tuesday.",
            "created_at": iso(NIGHT1 - timedelta(days=30)),
            "expires_at": iso(NIGHT1 - timedelta(days=1)), "source": "agent_inferred",
            "confidence": 0.8}  # fmt: skip
    (tmp_path / "late.jsonl").write_text(json.dumps(late) + "\n")
    ok("import", str(tmp_path / "late.jsonl"))
    again = json.loads(ok(*night))
    assert again["run_id"] == first["run_id"] and again["status"] == "success"
    assert again["other_counts"]["rerun_of_completed_run"] == 1  # the CLI says so too
    code, out, err = invoke("receipts", "verify", first["run_id"])
    assert code == 0, out + err
    assert "late-1" in snapshot(home / "memlife.db")  # waits for the next night
    later = (*night[:4], iso(NIGHT1 + timedelta(days=1)), *night[5:])
    nxt = json.loads(ok(*later))
    assert "late-1" not in snapshot(home / "memlife.db")
    ok("receipts", "verify", nxt["run_id"])


def test_a_superseded_record_updated_and_merged_again_keeps_its_first_night_verified(
    home: Path, tmp_path: Path
) -> None:
    """The adversary lets a night merge two facts (A superseded by R), forgets R online,
    restates A (a new record), puts A back active with `import --update` (a receipted manual
    run), and lets the next night merge A with the restatement. Every step is journaled and
    receipted: `receipts verify` of the first night, verified before, must still pass."""
    _background(tmp_path)
    ns, old = "/conversations/conv-42/joanna", "Joanna's phone number is 555 0101."
    for fact in (old, "Joanna changed her phone number; it is now 555 0177."):
        ok("remember", fact, "--actor", "conv-42", "--namespace", ns, "--subject", "phone")
    night = ("run", "--engine", "local", "--allow-future-cutoff", "--json", "--now")
    first = json.loads(ok(*night, iso(NIGHT1)))
    ok("receipts", "verify", first["run_id"])
    (a,) = [r for r in snapshot(home / "memlife.db").values() if r["content"] == old]
    m = LongTermMemory(SqliteStore(home / "memlife.db"), ledger=AccessLedger(home / "ledger"))
    try:
        assert m.forget([a["provenance"]["replaced_by"]], actor="conv-42")
        assert m.remember("conv-42", ns, "phone", old).created
    finally:
        m.close()
        m.store.close()
    a.update(status="active", provenance={**a["provenance"], "replaced_by": None})
    (tmp_path / "update.jsonl").write_text(json.dumps(a) + "\n")
    ok("import", str(tmp_path / "update.jsonl"), "--update")
    second = json.loads(ok(*night, iso(NIGHT1 + timedelta(days=1))))
    assert second["lifecycle"]["superseded"] == 2  # A and its restatement merged
    code, out, err = invoke("receipts", "verify", first["run_id"])
    assert code == 0, out + err


def test_a_superseded_record_repointed_behind_verifys_back_is_named(
    home: Path, tmp_path: Path
) -> None:
    """The adversary edits the store after a night merged two facts: a source the night
    superseded now names another active record as its replacement, with no operation
    saying so. `receipts verify` of the night must name it (SUPERSEDE_MISMATCH)."""
    _background(tmp_path)
    ns, old = "/conversations/conv-42/joanna", "Joanna's phone number is 555 0101."
    for fact in (old, "Joanna changed her phone number; it is now 555 0177."):
        ok("remember", fact, "--actor", "conv-42", "--namespace", ns, "--subject", "phone")
    first = json.loads(ok("run", "--engine", "local", "--allow-future-cutoff", "--json",
                          "--now", iso(NIGHT1)))  # fmt: skip
    (a,) = [r for r in snapshot(home / "memlife.db").values() if r["content"] == old]
    with SqliteStore(home / "memlife.db") as s:
        rec = s.get(a["id"])
        assert rec is not None and rec.provenance.replaced_by
        other = next(r for r in s.iter_all() if r.status.value == "active" and r.namespace == ns)
        rec.provenance.replaced_by = other.id
        s.put_many([rec])
    code, out, err = invoke("receipts", "verify", first["run_id"])
    assert code != 0 and "SUPERSEDE_MISMATCH" in out + err, out + err
