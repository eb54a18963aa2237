"""Session 49 (left by audit 49e, now refused): a manual run given a time without a zone.

``quarantine.manual_run`` (every hold, release, erase, purge and review resolution through
the Python API) kept a naive ``now`` as it was: a hold's receipt said a cutoff with no
zone, and ``purge`` raised TypeError comparing it with stored times. The CLI's ``--now``
already refused such a time; the library now refuses it the same way, before any write.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from memlife.errors import InputError
from memlife.holds import place_hold
from memlife.quarantine import purge
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_guards_session35 import rec

NAIVE = datetime(2026, 11, 1, 12)


def _receipt_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_a_hold_at_a_naive_time_is_refused_before_any_write(tmp_path: Path) -> None:
    receipts = tmp_path / "receipts"
    with SqliteStore(tmp_path / "m.db") as s:
        s.put_many([rec("m-1")])
        with pytest.raises(InputError, match="without a zone"):
            place_hold(s, ids=["m-1"], receipts=f"file://{receipts}", now=NAIVE)
        assert not s.get("m-1").held
    assert _receipt_files(receipts) == []


def test_a_purge_at_a_naive_time_is_an_input_error_not_a_type_error(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "m.db") as s:
        s.put_many([rec("m-1")])
        with pytest.raises(InputError, match="without a zone"):
            purge(s, 30, receipts=f"file://{tmp_path}/receipts", now=NAIVE)


def test_control_a_zoned_time_in_any_zone_is_one_instant(tmp_path: Path) -> None:
    receipts = tmp_path / "receipts"
    with SqliteStore(tmp_path / "m.db") as s:
        s.put_many([rec("m-1")])
        zoned = NAIVE.replace(tzinfo=UTC).astimezone(timezone(timedelta(hours=5)))
        place_hold(s, ids=["m-1"], receipts=f"file://{receipts}", now=zoned)
        assert s.get("m-1").held
    assert _receipt_files(receipts)
