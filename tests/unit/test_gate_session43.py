"""Audit 43g (session 43): the regression gate against an adversary and a careless operator.

The gate's shadow recall must see what online recall serves: a record online never returns
(past its deadline, kept by the run: a namespace where deletion is not enforced, a legal
hold) must not stand in for a fact the run's changes take away. A set the gate cannot load
stops every engine's run before it starts, and `eval init` never hands the gate such a set.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.audit import open_sink
from memlife.cli import app
from memlife.evalset import EvalSetError, load_cases
from memlife.ledger import AccessLedger
from memlife.model import MemoryType, RetentionClass, Source, Status
from memlife.online.memory import LongTermMemory
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import ACTOR, NOW, rec, write_cases

QUERY = "What is the user allergic to?"
PEANUTS = {"id": "peanuts", "query": QUERY, "actor_id": ACTOR,
           "must_retrieve": [{"fact": "peanuts"}], "impact": "high", "k": 3}  # fmt: skip
# the newest statement wins offline: "peanuts" leaves recall once the older is superseded
FACTS = [
    rec("m-peanut", "facts", "Allergic to peanuts.", subject="allergy", age=300),
    rec("m-shell", "facts", "Allergic to shellfish.", subject="allergy", age=20),
]
# the same words online never serves: past its deadline, and kept by the night
HIDDEN = {
    "not-enforced": rec("m-note", "notes", "Allergic to peanuts.", age=400,
                        expires=NOW - timedelta(days=30)),
    "legal-hold": rec("m-held", "episodes", "Allergic to peanuts.", age=400,
                      mtype=MemoryType.episodic, retention=RetentionClass.legal_hold,
                      expires=NOW - timedelta(days=30)),
}  # fmt: skip


def online_contents(home: Path) -> list[str]:
    store = SqliteStore(home / "memlife.db")
    memory = LongTermMemory(store, ledger=AccessLedger(home / "eval-ledger", flush_seconds=None))
    try:
        return [h.record.content for h in memory.recall(ACTOR, QUERY, k=3, log=False)]
    finally:
        memory.close()
        store.close()


@pytest.mark.parametrize("hidden", sorted(HIDDEN))
def test_a_record_online_never_serves_does_not_hide_a_lost_fact(
    home: Path, tmp_path: Path, hidden: str
) -> None:
    """The adversary keeps an expired copy of a fact where the night never deletes it (a
    namespace outside enforcement, a legal hold): online recall hides it, the gate's views
    do not. A consolidation then drops the fact's only served record. What the gate lets
    through must leave its high-impact case passing online as it passed before."""
    store = SqliteStore(home / "memlife.db")
    store.put_many([*FACTS, HIDDEN[hidden]])
    store.close()
    assert "Allergic to peanuts." in online_contents(home)  # the case passes online before
    cases = write_cases(tmp_path / "cases.yaml", [PEANUTS])

    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))

    assert summary.gate is not None
    assert "Allergic to peanuts." in online_contents(home), summary.gate["status"]


# memories as an agent saves them (LoCoMo's shape): no subject, no preference namespace, no
# procedure, no deadline, nothing erased: nothing a starter case is drawn from
UNLABELLED = [rec(f"m-obs-{i}", "notes", text, age=30 + i) for i, text in enumerate(
    ["Caroline went to an LGBTQ support group.", "Melanie painted a sunrise last year."])]  # fmt: skip


def test_eval_init_finding_no_case_writes_no_set_the_gate_then_refuses(
    home: Path, tmp_path: Path
) -> None:
    """A careless operator runs `eval init` on unlabelled memories and does as it says:
    `memlife run --eval-cases FILE`, or MEMLIFE_EVAL_CASES on the workers. A set of no case
    is refused by every load (exit 2 every night), so init must say it found none and write
    no such file."""
    store = SqliteStore(home / "memlife.db")
    store.put_many(UNLABELLED)
    store.close()
    out = tmp_path / "starter.yaml"

    res = CliRunner().invoke(app, ["eval", "init", "-o", str(out), "--now", NOW.isoformat()])

    written = out.exists()
    if written:  # what the gate does with what init wrote
        with pytest.raises(EvalSetError, match="no cases"):
            load_cases(out)
    assert res.exit_code != 0 and not written, res.output


def test_a_set_that_does_not_load_stops_the_run_before_it_starts(
    home: Path, tmp_path: Path
) -> None:
    """The nightly flow reads its set from MEMLIFE_EVAL_CASES and runs ``pipeline.run``
    (as run_local here) without the CLI's check. A set emptied (or mistyped) on the workers
    must stop the run before its manifest, as the docs say ("stops the run before it starts"):
    not after every shard was planned and every group consolidated (a model's calls paid)."""
    store = SqliteStore(home / "memlife.db")
    store.put_many(FACTS)
    store.close()
    empty = tmp_path / "cases.yaml"
    empty.write_text("cases: []\n")

    with pytest.raises(EvalSetError, match="no cases"):
        run_local(RunConfig(dry_run=False, now=NOW, eval_cases=str(empty)))

    assert list(open_sink(f"file://{home / 'receipts'}").list("runs/")) == []


def test_a_case_failing_before_the_run_does_not_hold_back_another_tenants_hard_expiry(
    home: Path, tmp_path: Path
) -> None:
    """u-1 forgot the procedure its high-impact case pins (pending deletion, in its grace):
    the case fails before the run and after, whatever the run does. The night has one
    change, u-2's hard expiry, an obligation no case of u-1 can see (recall is actor-scoped).
    One tenant's failing case must not hold back another tenant's deletions: it is deleted,
    not quarantined night after night."""
    router = rec("m-router", "procedures",
                 "To reset the router: unplug it, wait 30 seconds, plug it back in.",
                 subject="router_reset", mtype=MemoryType.procedural,
                 source=Source.system_of_record, age=20, status=Status.pending_delete,
                 status_changed_at=NOW - timedelta(days=2))  # fmt: skip
    lima = rec("m-u2-trip", "episodes", "Planned a trip to Lima.", actor="u-2", age=40,
               mtype=MemoryType.episodic, expires=NOW - timedelta(days=3))  # fmt: skip
    store = SqliteStore(home / "memlife.db")
    dog = rec("m-dog", "facts", "Has a dog named Rex.", subject="pet", age=30)
    store.put_many([router, dog, lima])
    store.close()
    case = {"id": "router", "query": "What are the steps for router reset?", "actor_id": ACTOR,
            "must_retrieve": ["m-router"], "impact": "high"}  # fmt: skip
    cases = write_cases(tmp_path / "cases.yaml", [case])

    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))

    g = summary.gate or {}
    assert g["before"]["high_impact_failed"] == ["router"]  # nothing the run did broke it
    store = SqliteStore(home / "memlife.db")
    try:
        assert store.get("m-u2-trip") is None, store.get("m-u2-trip").status
    finally:
        store.close()
    assert summary.lifecycle["deleted"] == 1 and summary.lifecycle["quarantined"] == 0


def test_a_gated_dry_run_leaves_the_store_file_byte_identical(home: Path, tmp_path: Path) -> None:
    """A dry run changes nothing in the store (invariant 7), its gate included: the gate's
    views embed every record of the cases' actors, and a dry run's vectors go to its own
    cache file (run_gate's ``make_embeddings``), never into the store's file. Mutation:
    ``cache=None`` in run_commit.run_gate for dry runs (the store's cache keeps them)."""
    store = SqliteStore(home / "memlife.db")
    store.put_many([*FACTS, HIDDEN["not-enforced"]])
    store.close()
    db = home / "memlife.db"
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    cases = write_cases(tmp_path / "cases.yaml", [PEANUTS])

    summary = run_local(RunConfig(dry_run=True, now=NOW, eval_cases=cases))

    assert summary.gate is not None and summary.gate["cases"] == 1  # the gate did run
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
