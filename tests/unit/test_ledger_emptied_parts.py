"""A ledger part an erasure empties keeps the names it carried (local and S3).

An ingest killed between its day's part and the day's marker writes that part again on
its rerun; the part a rewrite put in its place names it, so the rerun's copy is not read.
When a later erasure left that replacing part empty it was removed, and with it the only
name of the ingest's part: the rerun brought every row back, erased ones included.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memlife.ledger import AccessLedger
from memlife.state.ledger import S3AccessLedger
from tests.support.aws_state import aws_state
from tests.unit.test_guards_session37g import _get, _trail


@pytest.fixture()
def trail(tmp_path: Path) -> Path:
    """One log file with reads of three records on one day."""
    return _trail(tmp_path, a=[_get(f"m-{i}", f"2025-05-01T1{i}:00:00Z") for i in (1, 2, 3)])


@pytest.fixture()
def s3_ledger() -> Iterator[S3AccessLedger]:
    with aws_state("inprocess", table="ledger-emptied") as (_, state):
        yield S3AccessLedger(state)


def _killed_before_the_day_marker(
    ledger: AccessLedger, trail: Path, mp: pytest.MonkeyPatch
) -> None:
    real = ledger._mark_ingested

    def killed(name: str) -> None:
        if "#date=" in name:
            raise OSError("killed between the part and its day marker")
        real(name)

    mp.setattr(ledger, "_mark_ingested", killed)
    with pytest.raises(OSError):
        ledger.ingest_cloudtrail(trail)
    mp.undo()


def _erase_all_then_rerun(ledger: AccessLedger, trail: Path, mp: pytest.MonkeyPatch) -> list[str]:
    _killed_before_the_day_marker(ledger, trail, mp)
    assert ledger.erase(["m-1"]) == 1  # the ingest's part rewritten: the new one names it
    assert ledger.erase(["m-2", "m-3"]) == 2  # that one emptied
    assert ledger.read().num_rows == 0
    ledger.ingest_cloudtrail(trail)  # the rerun writes the ingest's part again
    return sorted(ledger.read().column("record_id").to_pylist())


def test_an_emptied_part_still_names_the_ingest_part_it_replaced(
    tmp_path: Path, trail: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    assert _erase_all_then_rerun(ledger, trail, monkeypatch) == []


def test_an_emptied_part_on_s3_still_names_the_ingest_part_it_replaced(
    s3_ledger: S3AccessLedger, trail: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _erase_all_then_rerun(s3_ledger, trail, monkeypatch) == []


def test_an_emptied_part_of_appended_rows_is_removed(tmp_path: Path) -> None:
    """The rule has its limit: a part of appended rows has a fresh name no rerun writes
    again, so emptied it goes (no empty file for every night to read)."""
    from datetime import UTC, datetime

    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.append("u1", "/users/u1/facts", "m-1", at=datetime(2025, 5, 1, tzinfo=UTC))
    ledger.flush()
    assert ledger.erase(["m-1"]) == 1
    assert ledger.files() == []
