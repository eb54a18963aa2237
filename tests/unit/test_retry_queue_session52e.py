"""Audit 52e: the retry queue hands an applier two operations on one record.

The retry queue batches due operations by kind and shard, across runs. An expired record
whose delete the service fails retryably (AgentCore: a 500, a throttle) on two nights had
two delete operations journaled, each due: last night's (retried and failed again by the
next night's queue) and the one that night planned for it anew. (Since audit 52e2 the
night plans none while one is queued; an operator's requeue of a terminal failure the
next night planned anew still leaves two, which the test below builds.) The delete applier keyed
its batch by record id (``{o.record_id: o}``), so it answered one of the two operations
and the lifecycle stopped on a ``KeyError`` for the other: the night crashed in its retry
queue, before anything else, and so did every night after it (the two stay due). Control:
one night's failure, finished by the next night's queue.

The fake AgentCore (real boto3 over HTTP, moto DynamoDB sidecar) fails the deletes; the
journal is the home's, as in production without MEMLIFE_STATE.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from memlife.journal import OpKind, Outcome
from tests.e2e.test_agentcore_nightly import (  # noqa: F401
    ac,
    apply,
    expired,
    harness,
    home,
    journal,
    present,
)
from tests.fakes.agentcore import bulk_load
from tests.support.lifecycle import CUTOFF, operation_receipts

ACTOR = "u-rq"


def _deletes(env: dict[str, Any], rid: str) -> list[Any]:
    return [o for o in journal(env).for_record(rid) if o.kind is OpKind.delete]


def test_a_delete_failed_on_two_nights_is_finished_once_by_the_queue(ac: dict) -> None:  # noqa: F811
    """The record's delete fails on two nights (two operations due); the third night's
    queue must finish it: the record gone, one receipt saying deleted, the night a success."""
    store, fake = ac["store"], ac["fake"]
    rec = expired(1, ACTOR)
    bulk_load(store, fake, [rec])
    # since audit 52e2 a night plans no second delete while one is queued: the two due
    # operations come from an operator's requeue of night 1's terminal failure after night 2
    # planned the record anew (test_due_once_audit52e2.py)
    fake.fail_next_deletes([rec.id], 400, times=1)
    apply(ac)
    fake.fail_next_deletes([rec.id], 500, times=50)
    apply(ac, now=CUTOFF + timedelta(days=1))
    [first] = [o for o in _deletes(ac, rec.id) if o.next_retry_at is None]
    journal(ac).resolve(first.operation_id, "requeued", retry_at=CUTOFF + timedelta(days=1))
    ops = _deletes(ac, rec.id)
    assert len(ops) == 2 and all(o.next_retry_at is not None for o in ops), ops
    assert present(fake, rec.id)
    fake.clear_scripts()  # the service is healthy again
    night = apply(ac, now=CUTOFF + timedelta(days=2))
    assert not present(fake, rec.id)
    assert night.status == "success", night.failed_shards
    outcomes = sorted(o.outcome.value for o in _deletes(ac, rec.id) if o.outcome is not None)
    assert outcomes == sorted([Outcome.deleted.value, Outcome.already_absent.value])
    said = [
        r["outcome"]
        for r in operation_receipts(ac["receipts"]).values()
        if r["action"] == "delete" and r["record_id"] == rec.id
    ]
    assert sorted(said) == ["already_absent", "deleted"], said  # one claim of the deletion


def test_control_a_delete_failed_on_one_night_is_finished_by_the_next(ac: dict) -> None:  # noqa: F811
    store, fake = ac["store"], ac["fake"]
    rec = expired(2, ACTOR)
    bulk_load(store, fake, [rec])
    fake.fail_next_deletes([rec.id], 500, times=50)
    apply(ac)
    assert len(_deletes(ac, rec.id)) == 1
    fake.clear_scripts()
    night = apply(ac, now=CUTOFF + timedelta(days=1))
    assert not present(fake, rec.id)
    assert night.status == "success" and night.other.get("retry_queue_deleted") == 1
