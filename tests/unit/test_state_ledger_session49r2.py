"""Audit 49r2: the S3 ledger's create-only rewrite (audit 49x3) with a third worker.

A part's rewrite is named after it (part-r-<sha of the part>) and written create-only, so
two workers rewriting one part at once collide and the loser folds its erasure into the
winner's copy. The loser does that by rewriting the winner's copy under a new name and
deleting it: the name is free again. A third worker that listed the original part before
either wrote then puts that name anew and succeeds; its copy is already named replaced
by the loser's, so no reader sees it, and the record it erased stays in the copy every
reader counts. Moto S3 in process; only the S3 client's put is stubbed so one worker's
request lands between another's (the network boundary), as test_state_ledger_session49.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memlife.state.dynamodb import DynamoState
from memlife.state.ledger import S3AccessLedger
from tests.support.aws_state import aws_state
from tests.unit.test_state_ledger_session49 import _before_first_put, _ids, _one_part


@pytest.fixture()
def state() -> Iterator[DynamoState]:
    with aws_state("inprocess") as (_, st):
        yield st


def _workers(state: DynamoState) -> tuple[S3AccessLedger, S3AccessLedger, S3AccessLedger]:
    first = S3AccessLedger(state)
    _one_part(first)
    return (
        first,
        S3AccessLedger(DynamoState(state.settings)),
        S3AccessLedger(DynamoState(state.settings)),
    )


def test_three_erasures_of_one_part_at_once_all_hold(state: DynamoState) -> None:
    a, b, c = _workers(state)
    # c lists the part, then b, then a; a writes first, b loses to a, c writes last
    _before_first_put(b.state, lambda: a.erase(["m-1"], actor_id="u-1"))
    _before_first_put(c.state, lambda: b.erase(["m-2"], actor_id="u-1"))
    c.erase(["m-3"], actor_id="u-1")
    assert _ids(state) == ["m-0", "m-4"]


def test_control_two_erasures_of_one_part_at_once_both_hold(state: DynamoState) -> None:
    a, b, _ = _workers(state)
    _before_first_put(b.state, lambda: a.erase(["m-1"], actor_id="u-1"))
    b.erase(["m-2"], actor_id="u-1")
    assert _ids(state) == ["m-0", "m-3", "m-4"]
