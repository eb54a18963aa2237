"""Audit 49x3: the access ledger on S3 (memlife/state/ledger.py) shared by several workers.

Two findings, on moto S3 in process, with two workers as two DynamoState objects (two
boto3 clients) on one bucket; the only thing stubbed is the S3 client's call, where a
second worker's request lands between two of the first's (the network boundary):

- an erasure's rewrite of a part raced by another worker's rewrite of the same part (the
  erase applier and an online worker's after-flush scrub of that very erasure,
  ``ledger_ingest.write_checked``; neither waits for the other) left two replacements of
  the part, both live: every other read in it counted twice, and with two different
  erasures each copy kept the record the other erased;
- a compaction killed while deleting its sources, whose folded part is not small (a busy
  day), was followed by a compaction of the sources left: the big folded part was never
  read, so its rows and the new fold's were both counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow.compute as pc
import pytest

from memlife.state.dynamodb import DynamoState
from memlife.state.ledger import S3AccessLedger
from tests.support.aws_state import aws_state

T0 = datetime(2026, 11, 1, 9, tzinfo=UTC)
NS = "/users/u-1/facts"


@pytest.fixture()
def state() -> Iterator[DynamoState]:
    with aws_state("inprocess") as (_, st):
        yield st


def _one_part(ledger: S3AccessLedger, n: int = 5) -> None:
    """One flush of ``n`` reads (m-0 .. m-{n-1}): one part, as an online worker writes it."""
    for j in range(n):
        ledger.append("u-1", NS, f"m-{j}", at=T0 + timedelta(minutes=j))
    ledger.flush()


def _ids(state: DynamoState) -> list[str]:
    """Every read a fresh reader (the next night) counts, by record id."""
    return sorted(S3AccessLedger(DynamoState(state.settings)).read()["record_id"].to_pylist())


def _before_first_put(state: DynamoState, meanwhile: Any) -> None:
    """Run ``meanwhile`` (another worker) right before this worker's next S3 put lands."""
    real = state.s3.put_object
    fired: list[bool] = []

    def put_object(**kw: Any) -> Any:
        if not fired:
            fired.append(True)
            meanwhile()
        return real(**kw)

    state.s3.put_object = put_object  # type: ignore[method-assign]


def test_one_erasure_applied_by_two_workers_at_once_counts_every_other_read_once(
    state: DynamoState,
) -> None:
    applier = S3AccessLedger(state)
    _one_part(applier)
    scrub = S3AccessLedger(DynamoState(state.settings))  # an online worker's after-flush scrub
    _before_first_put(state, lambda: scrub.erase(["m-1"], actor_id="u-1"))
    applier.erase(["m-1"], actor_id="u-1")
    assert _ids(state) == ["m-0", "m-2", "m-3", "m-4"]


def test_two_erasures_of_one_part_at_once_both_hold(state: DynamoState) -> None:
    first = S3AccessLedger(state)
    _one_part(first)
    second = S3AccessLedger(DynamoState(state.settings))
    _before_first_put(state, lambda: second.erase(["m-2"], actor_id="u-1"))
    first.erase(["m-1"], actor_id="u-1")
    assert _ids(state) == ["m-0", "m-3", "m-4"]


def test_control_one_erasure_after_the_other_counts_every_other_read_once(
    state: DynamoState,
) -> None:
    first = S3AccessLedger(state)
    _one_part(first)
    first.erase(["m-1"], actor_id="u-1")
    S3AccessLedger(DynamoState(state.settings)).erase(["m-1", "m-2"], actor_id="u-1")
    assert _ids(state) == ["m-0", "m-3", "m-4"]


def _busy_day(ledger: S3AccessLedger, parts: int = 4) -> int:
    """``parts`` small parts of one day; returns a size bound they are under and their
    fold is not (a day whose folded part is big: 16 MiB by default)."""
    for i in range(parts):
        for j in range(50):
            ledger.append("u-1", NS, f"m-{j}", at=T0 + timedelta(minutes=i))
        ledger.flush()
    return max(size for _, size in ledger._objects()) + 1


def _kill_after_deletes(state: DynamoState, n: int) -> None:
    real = state.s3.delete_object
    done: list[bool] = []

    def delete_object(**kw: Any) -> Any:
        if len(done) >= n:
            raise ConnectionError("worker killed while deleting the compacted sources")
        done.append(True)
        return real(**kw)

    state.s3.delete_object = delete_object  # type: ignore[method-assign]


def _reads(state: DynamoState) -> int:
    table = S3AccessLedger(DynamoState(state.settings)).read()
    return int(pc.count(table["record_id"]).as_py())


def test_a_compaction_killed_mid_delete_then_run_again_counts_each_read_once(
    state: DynamoState,
) -> None:
    ledger = S3AccessLedger(state)
    small = _busy_day(ledger)
    assert _reads(state) == 200
    _kill_after_deletes(state, 2)  # 2 of the 4 sources gone, then the worker dies
    with pytest.raises(ConnectionError):
        ledger.compact(small_bytes=small)
    folded = [s for k, s in ledger._objects() if k.rsplit("/", 1)[-1].startswith("part-c-")]
    assert folded and folded[0] >= small  # the folded part is not small: not compacted again
    assert _reads(state) == 200  # the two sources left are replaced: skipped
    S3AccessLedger(DynamoState(state.settings)).compact(small_bytes=small)  # the next night
    assert _reads(state) == 200


def test_control_a_compaction_killed_before_any_delete_then_run_again(
    state: DynamoState,
) -> None:
    ledger = S3AccessLedger(state)
    small = _busy_day(ledger)
    _kill_after_deletes(state, 0)
    with pytest.raises(ConnectionError):
        ledger.compact(small_bytes=small)
    S3AccessLedger(DynamoState(state.settings)).compact(small_bytes=small)
    assert _reads(state) == 200
