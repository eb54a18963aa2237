"""Session 48 (audit 48ii): the starter evaluation set (`memlife eval init`) against the stores it reads.

Real components: two SQLite stores in one MEMLIFE_HOME (one receipts folder, as the home
fixture sets it), the memlife CLI in-process, real MiniLM.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from memlife.evalset import CaseKind, load_cases
from memlife.gate import evaluate
from memlife.model import MemoryType, RetentionClass, Source
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.gate import ACTOR, FACTS, NOW, rec


def test_a_starter_set_holds_no_erased_case_from_another_stores_erasure(home: Path) -> None:
    """Two stores share one home (a copy for staging beside the live one: same actors, same
    ids) and so one receipts folder. The user erases m-dog in the copy. `eval init` for
    the live store must not forbid the live store's own m-dog, which nothing erased there:
    such a case fails on that store from the day it is written (a forbidden hit every
    night), watching an erasure that never happened in it."""
    home.mkdir()
    live = home / "live.db"
    for db in (SqliteStore(home / "memlife.db"), SqliteStore(live)):
        db.put_many(FACTS)
        db.close()
    code, out, err = invoke("erase", "--actor", ACTOR, "--id", "m-dog", "--yes")
    assert code == 0, (out, err)  # erased in the copy (MEMLIFE_STORE)
    target = home / "cases.yaml"
    code, out, err = invoke("eval", "init", "--store", f"sqlite:///{live}", "-o", str(target))
    assert code == 0, (out, err)
    cases = load_cases(target)
    with SqliteStore(live) as db:
        assert db.get("m-dog") is not None  # alive in the live store
        failing = evaluate(db, cases)["failed_cases"]
    erased = [t.id for c in cases if c.kind is CaseKind.erased for t in c.forbidden]
    assert "m-dog" not in erased, failing


def test_a_starter_set_watches_every_erased_record(home: Path) -> None:
    """The user has three records erased. docs/evaluation.md: `eval init` writes an erased
    case for "every record in the erasure receipts"; the per-kind sample (2 by default) is
    for cases drawn from live records, not for erasures: the third erased record must be
    watched too, or its return goes unseen by the gate."""
    home.mkdir()
    with SqliteStore(home / "memlife.db") as db:
        db.put_many(FACTS)
    gone = ["m-allergy", "m-dog", "m-trip"]
    code, out, err = invoke(
        "erase", "--actor", ACTOR, *[a for g in gone for a in ("--id", g)], "--yes"
    )
    assert code == 0, (out, err)
    target = home / "cases.yaml"
    code, out, err = invoke("eval", "init", "-o", str(target))
    assert code == 0, (out, err)
    erased = sorted(
        t.id for c in load_cases(target) if c.kind is CaseKind.erased for t in c.forbidden
    )
    assert erased == gone


def procedure_ttl_policy(tmp_path: Path, days: int) -> str:
    """The default policy with a TTL for procedures (the shipped one has none)."""
    data = yaml.safe_load(Path("policies/default.yaml").read_text())
    data["version"] = "2026.11-test-procedure-ttl"
    data["memory_types"]["procedural"]["default_ttl_days"] = days
    p = tmp_path / "procedure-ttl.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


def test_every_case_eval_init_writes_passes_on_the_store_as_the_gate_reads_it(
    home: Path, tmp_path: Path
) -> None:
    """A procedure under legal hold has outlived the policy's procedural TTL: the night keeps
    it (the hold) and online recall, like the gate, no longer serves it. `eval init` must not
    pin a high-impact case on it: such a case fails on the store as it is (docs: "a
    must-retrieve case whose question does not find its record ... is dropped"), so every
    night would be blocked (HIGH_IMPACT_CASE_FAILED) whatever it does."""
    home.mkdir()
    policy = procedure_ttl_policy(tmp_path, 30)
    held = rec("m-modem", "procedures", "To reset the modem: hold the reset button 10 seconds.",
               subject="modem_reset", mtype=MemoryType.procedural, age=60,
               source=Source.system_of_record, retention=RetentionClass.legal_hold)  # fmt: skip
    with SqliteStore(home / "memlife.db") as db:
        db.put_many(
            [*FACTS[:2], held, rec("m-tea", "preferences", "Drinks green tea.", subject="beverage")]
        )
    target = home / "cases.yaml"
    code, out, err = invoke("eval", "init", "--policy", policy, "--now", NOW.isoformat(),
                            "-o", str(target))  # fmt: skip
    assert code == 0, (out, err)
    code, out, err = invoke("eval", "--cases", str(target), "--policy", policy, "--json")
    assert json.loads(out)["failed_cases"] == [], out
    assert code == 0
