"""Session 48 (audit 48m): the AgentCore store's in-flight marker on updates (audit 48e:
memlife/stores/agentcore/writes.py ``_in_flight``, ``_settle``), over the local AgentCore
fake and a moto sidecar table, as the session-48 race tests run them. An update in flight
blocks the record's other writers; once it is answered, or its writer is long dead, it
must block nothing."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from memlife.stores.agentcore import AgentCoreStore
from memlife.stores.agentcore.writes import WRITING_STALE_S
from memlife.stores.agentcore_sidecar import Sidecar, SidecarItem
from memlife.stores.base import StoreError
from tests.fakes.agentcore import FakeAgentCore
from tests.unit.test_agentcore_races_session48 import harness, rec, two  # noqa: F401

Two = tuple[AgentCoreStore, AgentCoreStore, FakeAgentCore]


def _item(store: AgentCoreStore) -> SidecarItem:
    item = store.sidecar.get("r1")
    assert item is not None
    return item


def test_an_answered_update_leaves_the_record_free_for_the_next(two: Two) -> None:  # noqa: F811
    """Weak test (mutant: `_settle` keeps `writing` set). One writer updates r1 twice in a
    row: the first update is answered, so the second is not refused as racing it."""
    a, _, _ = two
    assert a.put_many([rec("likes tea")]).succeeded == ["r1"]
    assert a.put_many([rec("likes green tea")]).succeeded == ["r1"]
    assert a.put_many([rec("likes black tea")]).succeeded == ["r1"]
    assert _item(a).writing is None and a.get("r1").content == "likes black tea"  # type: ignore[union-attr]


def test_a_refused_update_is_answered_too_and_moves_nothing(two: Two) -> None:  # noqa: F811
    """Weak test (mutants: `answered` only the ok outcomes; `_settle` naming the new
    namespace for a refused update). AgentCore refuses r1's move to another namespace
    (a 400): r1 stays where it was, the sidecar says so, and the next update goes out."""
    a, _, fake = two
    assert a.put_many([rec("likes tea")]).succeeded == ["r1"]
    fake.fail_next_updates(["r1"], 400)
    moved = a.put_many([rec("likes tea", namespace="/users/u1/moved")])
    assert moved.succeeded == [] and _item(a).namespace == "/users/u1"
    assert a.put_many([rec("likes green tea")]).succeeded == ["r1"]


def test_an_update_whose_writer_died_long_ago_blocks_nothing(two: Two) -> None:  # noqa: F811
    """Weak test (mutant: `_in_flight` True whatever the age). A writer staged an update of
    r1 and died before it was answered (the item says `writing`, staged an hour ago).
    Another writer's update goes out: a dead writer cannot block the record for ever."""
    a, b, _ = two
    assert a.put_many([rec("likes tea")]).succeeded == ["r1"]
    item = _item(a)
    died = (datetime.now(UTC) - timedelta(seconds=60 * WRITING_STALE_S)).isoformat()
    assert not a.sidecar.put_many([(replace(item, version=item.version + 1, writing=died),
                                    item.version)])  # fmt: skip
    assert b.put_many([rec("likes green tea")]).succeeded == ["r1"]


def test_a_conditional_sidecar_delete_that_fails_otherwise_stops_the_shard(two: Two) -> None:  # noqa: F811
    """Weak test (mutant: `delete_many` swallowing every ClientError, not only a lost
    condition). The versioned clean-up after a delete meets a sidecar table that is gone
    (deleted, or another region's name): a StoreError naming it, never a quiet success
    that leaves items behind."""
    a, _, _ = two
    gone = Sidecar(a.sidecar.client, "memlife-sidecar-no-such-table")
    with pytest.raises(StoreError) as err:
        gone.delete_many(["r1"], {"r1": 1})
    assert err.value.code == "SIDECAR_ResourceNotFoundException"
