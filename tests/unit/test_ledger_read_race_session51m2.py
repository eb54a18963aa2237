"""Mutation pass over audit 51d's ledger reads (audit 51m2).

Each test passes on the current code and fails under one hand mutant the session's tests
let live: a replacing part rewritten again between the reader's footer checks and its read
of what that part replaces (`live_parts` raised FileNotFoundError, the night's start failed,
where it lists again); and the S3 ledger's ``since`` taken as a local date, so the reads of
the UTC day before it (a zone east of UTC) were left out of a read that should hold them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import memlife.ledger_parts as ledger_parts
from memlife.ledger import AccessLedger
from memlife.state.dynamodb import DynamoState
from memlife.state.ledger import S3AccessLedger
from tests.support.aws_state import aws_state

T0 = datetime(2026, 11, 1, 9, tzinfo=UTC)
NS = "/users/u-1/facts"


def _reads(ledger: AccessLedger, ids: list[str], at: datetime = T0) -> None:
    for j, rid in enumerate(ids):
        ledger.append("u-1", NS, rid, at=at + timedelta(minutes=j))
    ledger.flush()


def _counts(ledger: AccessLedger) -> dict[str, int]:
    return {rid: t.count for (_, rid), t in ledger.actor_stats().items()}


def _at_first_replaced(monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[], Any]) -> None:
    """Run ``meanwhile`` right after the footer checks, as the reader opens the replacing
    parts to learn what they replace."""
    real, fired = ledger_parts.replaced, list[bool]()

    def replaced(parts: Any) -> set[Path]:
        if not fired:
            fired.append(True)
            meanwhile()
        return real(parts)

    monkeypatch.setattr(ledger_parts, "replaced", replaced)


def test_a_replacing_part_rewritten_under_the_reader_is_listed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills `raise` for `continue` after `replaced` in `live_parts`: an erasure wrote a
    replacing part; a second erasure (an online scrub) rewrites that one while a night lists
    the ledger. The night counts the read that is left, and does not fail."""
    root = tmp_path / "ledger"
    agent = AccessLedger(root)
    _reads(agent, ["m-1", "m-2", "m-3"])
    AccessLedger(root).erase(["m-1"], actor_id="u-1")
    assert any(p.name.startswith(ledger_parts.REPLACING) for p in root.rglob("*.parquet"))
    _at_first_replaced(monkeypatch, lambda: AccessLedger(root).erase(["m-2"], actor_id="u-1"))
    assert _counts(AccessLedger(root)) == {"m-3": 1}


@pytest.fixture()
def state() -> Iterator[DynamoState]:
    with aws_state("inprocess") as (_, st):
        yield st


def test_an_s3_read_since_an_instant_east_of_utc_keeps_the_utc_day_before(
    state: DynamoState,
) -> None:
    """Kills `since.date()` for `since.astimezone(UTC).date()` in `S3AccessLedger.read`:
    2026-11-02 02:00 at UTC+5 is 2026-11-01 21:00 UTC; a read at 22:00 UTC that day sits in
    the 2026-11-01 partition and is after ``since``."""
    ledger = S3AccessLedger(state)
    _reads(ledger, ["m-old"], at=datetime(2026, 11, 1, 20, tzinfo=UTC))
    _reads(ledger, ["m-new"], at=datetime(2026, 11, 1, 22, tzinfo=UTC))
    since = datetime(2026, 11, 2, 2, tzinfo=timezone(timedelta(hours=5)))
    got = S3AccessLedger(DynamoState(state.settings)).read(since=since)
    assert got.column("record_id").to_pylist() == ["m-new"]
