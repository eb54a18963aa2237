"""Audit 52e2: a night plans no second delete for a record whose delete is still queued.

An expired record whose delete the service fails retryably (AgentCore: a 500) has a delete
operation in the retry queue. The next night's queue tries it again first, and it fails
again: it is due once more, minutes after that night's cutoff. The night then planned the
record for deletion anew, as if nothing were queued: a second delete operation. Since
audit 52e both are applied in turn, so the record ends with two operations and two
receipts, `deleted` and `already_absent` (and the night counted a failure of its own beside
the queue's). The night must plan nothing new for it: the queue finishes it, one operation,
one `deleted` receipt.

Controls: a queued delete that failed terminally (an operator's) is planned anew; another
tenant's queued delete of the same record id, or a queued operation of another kind on the
record, holds back nothing; an erasure of a record with a queued delete still erases it.

The fake AgentCore (real boto3 over HTTP, moto DynamoDB sidecar); the journal is the home's
SQLite file (no MEMLIFE_STATE) or the DynamoDB state table (MEMLIFE_STATE, moto).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from memlife import state as state_mod
from memlife.audit import open_sink
from memlife.erase import erase
from memlife.journal import Journal, Operation, OpKind, OpState, Outcome, open_journal
from memlife.pipeline import RunSummary
from memlife.review import verify_run
from tests.e2e.test_agentcore_nightly import (  # noqa: F401
    ac,
    apply,
    expired,
    harness,
    home,
    present,
    receipt,
)
from tests.fakes.agentcore import bulk_load
from tests.support.aws_state import CREDENTIALS, provision, state_url
from tests.support.lifecycle import CUTOFF, operation_receipts

ACTOR = "u-dq"
OUTCOMES = ("retained", "superseded", "deleted", "quarantined", "reviewed", "held", "failed")


@pytest.fixture(params=["sqlite", "dynamodb"])
def env(request: pytest.FixtureRequest, ac: dict, monkeypatch: pytest.MonkeyPatch) -> dict:  # noqa: F811
    """``ac`` with its journal in the home's SQLite file, or in a DynamoDB state table."""
    if request.param == "dynamodb":
        for k, v in CREDENTIALS.items():
            monkeypatch.setenv(k, v)
        url = state_url(f"memlife-state-{uuid.uuid4().hex[:8]}")
        monkeypatch.setenv("MEMLIFE_STATE", url)
        monkeypatch.setattr(state_mod, "_open", {url: provision(url)})
    else:
        monkeypatch.setenv("MEMLIFE_STATE", "local")
    return ac


def _journal(env: dict[str, Any]) -> Journal:
    return open_journal(env["store"])


def _deletes(env: dict[str, Any], rid: str) -> list[Operation]:
    return [o for o in _journal(env).for_record(rid) if o.kind is OpKind.delete]


def _said(env: dict[str, Any], rid: str) -> list[str]:
    return sorted(
        r["outcome"]
        for r in operation_receipts(env["receipts"]).values()
        if r["action"] == "delete" and r["record_id"] == rid
    )


def _sums(night: RunSummary) -> None:
    """Every processed record is in exactly one outcome, in the summary and the receipt."""
    for counts in (night.lifecycle, receipt(night)["counts"]):
        assert counts["processed"] == sum(counts[k] for k in OUTCOMES), counts


def _verified(env: dict[str, Any], night: RunSummary) -> None:
    """`receipts verify` of the night: journal, receipts and counts agree both ways."""
    v = verify_run(open_sink(env["sink"]), env["store"], _journal(env), night.run_id)
    assert list(v.problems) == [], v.problems


def _delete_failed(env: dict[str, Any], i: int) -> str:
    """An expired record whose delete night 1 failed retryably (the service answered 500)."""
    store, fake = env["store"], env["fake"]
    rec = expired(i, ACTOR)
    bulk_load(store, fake, [rec])
    fake.fail_next_deletes([rec.id], 500, times=50)
    apply(env)
    return rec.id


def _seed(env: dict[str, Any], kind: OpKind, actor: str, rid: str) -> Operation:
    """An earlier run's operation on ``rid``, failed retryably, due after the next night's
    cutoff (as a retry failed again by that night's queue is)."""
    ns = f"/users/{actor}/episodes"
    op = Operation(operation_id=f"op-seeded-{kind.value}-{actor}", run_id="run-earlier",
                   kind=kind, actor_id=actor, namespace=ns, record_id=rid,
                   reasons=["HARD_EXPIRED"], policy_version="v1")  # fmt: skip
    j = _journal(env)
    j.plan([op])
    return j.transition(op.operation_id, OpState.FAILED, outcome=Outcome.failed,
                        error="SERVICE", next_retry_at=CUTOFF + timedelta(days=1, hours=1))  # fmt: skip


# -- the finding ---------------------------------------------------------------------------------
def test_a_queued_delete_is_not_planned_again(env: dict) -> None:
    """Night 2: the queue's retry fails again; the night must not add a second delete. Night
    3: the queue finishes it: one operation, one `deleted` receipt, the night a success."""
    rid = _delete_failed(env, 1)
    night2 = apply(env, now=CUTOFF + timedelta(days=1))
    assert present(env["fake"], rid)
    ops = _deletes(env, rid)
    assert len(ops) == 1, [(o.run_id, o.state.value) for o in ops]  # no second operation
    # the record was planned (delete) and stays tonight: retained, its delete the queue's
    r = receipt(night2)
    assert r["planned"]["delete_expired"] == 1 and r["retry_queue_failed"] == 1
    assert night2.lifecycle["failed"] == 0 and night2.lifecycle["retained"] == 1
    assert {"id": rid, "reason": "DELETE_QUEUED"} in r["ids_not_deleted"]
    _sums(night2)
    _verified(env, night2)
    env["fake"].clear_scripts()  # the service is healthy again
    night3 = apply(env, now=CUTOFF + timedelta(days=2))
    assert not present(env["fake"], rid)
    assert night3.status == "success" and night3.other.get("retry_queue_deleted") == 1
    assert [o.outcome for o in _deletes(env, rid)] == [Outcome.deleted]
    assert _said(env, rid) == ["deleted"]
    _sums(night3)
    _verified(env, night3)


# -- controls --------------------------------------------------------------------------------------
def test_control_a_terminally_failed_delete_is_planned_anew(env: dict) -> None:
    """A 400 ends night 1's delete terminally (an operator's): night 2 plans and deletes."""
    store, fake = env["store"], env["fake"]
    rec = expired(2, ACTOR)
    bulk_load(store, fake, [rec])
    fake.fail_next_deletes([rec.id], 400, times=1)
    apply(env)
    [first] = _deletes(env, rec.id)
    assert first.state is OpState.FAILED and first.next_retry_at is None
    night = apply(env, now=CUTOFF + timedelta(days=1))
    assert not present(fake, rec.id)
    assert night.lifecycle["deleted"] == 1
    assert sorted(str(o.outcome) for o in _deletes(env, rec.id)) == ["deleted", "failed"]
    _sums(night)


def test_control_another_tenants_queued_delete_of_the_id_holds_nothing_back(env: dict) -> None:
    store, fake = env["store"], env["fake"]
    rec = expired(3, ACTOR)
    bulk_load(store, fake, [rec])
    _seed(env, OpKind.delete, "u-other", rec.id)
    night = apply(env)
    assert not present(fake, rec.id)
    assert night.lifecycle["deleted"] == 1
    _sums(night)


def test_control_a_queued_operation_of_another_kind_holds_nothing_back(env: dict) -> None:
    store, fake = env["store"], env["fake"]
    rec = expired(4, ACTOR)
    bulk_load(store, fake, [rec])
    _seed(env, OpKind.quarantine, ACTOR, rec.id)
    night = apply(env)
    assert not present(fake, rec.id)
    assert night.lifecycle["deleted"] == 1
    _sums(night)


def test_control_an_erasure_of_a_record_with_a_queued_delete_erases_it(env: dict) -> None:
    """Erasure wins: the record is erased at once (its receipt says so); the queued delete
    then finds it gone (already_absent) and claims no deletion."""
    rid = _delete_failed(env, 5)
    env["fake"].clear_scripts()
    out = erase(env["store"], ACTOR, ids=[rid], receipts=env["sink"],
                now=CUTOFF + timedelta(hours=2))  # fmt: skip
    assert not present(env["fake"], rid), out
    erased = [r for r in operation_receipts(env["receipts"]).values()
              if r["action"] == "erase" and r["record_id"] == rid]  # fmt: skip
    assert [r["outcome"] for r in erased] == ["deleted"], erased
    night = apply(env, now=CUTOFF + timedelta(days=1))
    assert night.status == "success"
    assert _said(env, rid) == ["already_absent"]
