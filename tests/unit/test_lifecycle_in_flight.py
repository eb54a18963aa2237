"""A user acting on a record a killed night left in flight, then the rerun.

Reduced cases of the lifecycle machine's ``killed_in_deletions`` and ``act_on_in_flight``
rules (tests/unit/test_stateful_lifecycle.py), which run them at random (session 42, audit d).
The forgotten-replacement case is the machine module's own test."""

from __future__ import annotations

import pytest

from tests.support.lifecycle import journaled_deletes, operation_receipts
from tests.unit.test_stateful_lifecycle import Lifecycle

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture
def machine():
    m = Lifecycle()
    try:
        m.seed()
        yield m
    finally:
        m.teardown()


def test_a_record_erased_between_its_journaled_delete_and_the_rerun(machine: Lifecycle) -> None:
    """A night is killed once it journaled the delete of a hard-expired record, before
    deleting it; the user erases that record; the rerun finds it gone. The erasure is the
    one operation that deleted it: the rerun's delete says ``already_absent``, never a
    second ``deleted`` (invariant 2: one deletion, one claim)."""
    m = machine
    m.night()
    m.advance_clock(1)
    m.killed_in_deletions("t1", "facts", skip=0, act=None, n=0, rerun=False)
    rid = f"t1-i{m.serial}"
    assert journaled_deletes(m.db) == {rid}
    m.erase_record(sorted(m.records()).index(rid))
    m.night()  # the rerun: the same cutoff, the same run
    m.one_delete_per_record()
    m.every_vanished_record_has_a_receipt()
    said = sorted(
        (o["action"], o["outcome"])
        for o in operation_receipts(m.receipts).values()
        if o["record_id"] == rid
    )
    assert said == [("delete", "already_absent"), ("erase", "deleted")]
