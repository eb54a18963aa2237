"""Session 47 (audit 47a): superseded retention counts from the supersede of THIS record (sessions 46g, 46k):
a supersede journaled for an erased record, moved again after its erasure, is no supersede of
the record that reuses its id."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from memlife.erase import erase
from memlife.journal import OpKind, open_journal
from memlife.model import Status
from memlife.pipeline import RunConfig, RunSummary, run_local
from tests.e2e.test_agentcore_nightly import ac, harness, home  # noqa: F401
from tests.fakes.agentcore import bulk_load
from tests.support.lifecycle import CUTOFF, gate_cases
from tests.unit.test_group_retry_session46 import _tea

DAY = timedelta(days=1)


def _night(ac_env: dict, now: Any, cases: str) -> RunSummary:
    config = RunConfig(dry_run=False, now=now, store=ac_env["url"], receipts=ac_env["sink"],
                       eval_cases=cases)  # fmt: skip
    return run_local(config, gate=lambda *a: {"blocked": False})


def test_a_retried_supersede_of_an_erased_record_does_not_delay_its_reused_ids_retention(
    ac: dict,  # noqa: F811
) -> None:
    """The adversary fails every supersede of a two-record group on the night of its write
    (AgentCore: a 500 on each; they wait in the retry queue), erases the older member, then
    stores under its id, in the same namespace, another record superseded 200 days ago. The
    retry queue ends the erased record's supersede on the next night (after the erasure).
    What must hold: the reused id's record, past its class's 90 days, is deleted; the
    erased record's supersede, planned before the erasure, is no supersede of this one."""
    store, fake = ac["store"], ac["fake"]
    recs = [_tea(0), _tea(1)]
    bulk_load(store, fake, recs)
    cases = gate_cases(ac["home"] / "none.db", recs)
    fake.fail_next_updates([r.id for r in recs], 500, times=100)
    first = _night(ac, CUTOFF, cases)
    assert first.lifecycle["failed"] == 2 and first.lifecycle.get("superseded", 0) == 0
    fake.clear_scripts()
    erase(store, "u-s", ids=["p-tea-0"], receipts=ac["sink"], now=CUTOFF + DAY / 2)
    assert store.get("p-tea-0") is None
    porto = _tea(1).model_copy(update={"id": "f-porto", "subject": "city",
                                       "content": "Lives in Porto."})  # fmt: skip
    reused = porto.model_copy(update={
        "id": "p-tea-0", "content": "Lives in Lisbon.", "status": Status.superseded,
        "created_at": CUTOFF - 300 * DAY, "status_changed_at": CUTOFF - 200 * DAY,
        "provenance": porto.provenance.model_copy(update={"replaced_by": "f-porto"}),
    })  # fmt: skip
    assert not store.put_many([porto, reused]).failed
    for night in (1, 2):
        _night(ac, CUTOFF + night * DAY, cases)
    ops = [o for o in open_journal(store).for_records(["p-tea-0"])["p-tea-0"]
           if o.kind is OpKind.supersede]  # fmt: skip
    assert ops, "the erased record's supersede is in the journal"
    assert store.get("p-tea-0") is None, "kept by the erased record's supersede"


def _ttl_sweep(state: Any, epoch: float) -> None:
    """What DynamoDB's TTL does by ``epoch``: every item whose ``expires_at`` passed is gone."""
    pages = state.ddb.get_paginator("scan").paginate(TableName=state.table)
    for item in (i for page in pages for i in page["Items"]):
        if "expires_at" in item and float(item["expires_at"]["N"]) < epoch:
            state.ddb.delete_item(TableName=state.table, Key={"pk": item["pk"], "sk": item["sk"]})


def test_on_dynamodb_an_erasure_outlives_the_supersede_it_voids() -> None:
    """On AWS state a finished operation expires after ``ttl_days`` (30), a supersede after a
    year (its time counts for superseded retention). The adversary's record m-old is
    superseded, then erased (the id is free); 31 days on DynamoDB's TTL has dropped the
    erasure and kept the supersede. What must hold: a record that takes the id then (an
    import superseded 200 days ago) gets no supersede time from the erased record."""
    from memlife.journal import Operation, OpState, Outcome, supersede_times_via
    from memlife.journal.dynamodb import DynamoJournal
    from memlife.model import utcnow
    from tests.support.aws_state import aws_state

    scope = {"m-old": ("u-1", "/users/u-1/facts")}
    with aws_state("inprocess") as (_, state):
        journal = state.part("journal", DynamoJournal)
        for oid, kind, outcome in (("o-sup", OpKind.supersede, Outcome.superseded),
                                   ("o-erase", OpKind.erase, Outcome.deleted)):  # fmt: skip
            journal.plan([Operation(operation_id=oid, run_id=f"run-{oid}", kind=kind,
                                    actor_id="u-1", namespace="/users/u-1/facts",
                                    record_id="m-old", reasons=[], policy_version="p",
                                    replacement_id="m-r" if kind is OpKind.supersede else None)])  # fmt: skip
            journal.transition(oid, OpState.APPLIED, outcome=outcome)
            journal.transition(oid, OpState.RECEIPTED)
        assert supersede_times_via(journal, ["m-old"], scope) == {}
        _ttl_sweep(state, (utcnow() + 31 * DAY).timestamp())
        assert supersede_times_via(journal, ["m-old"], scope) == {}
