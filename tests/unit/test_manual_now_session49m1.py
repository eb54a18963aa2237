"""Audit 49m1 (mutation pass over session 49): ``purge`` refuses a time without a zone
itself, before it looks for candidates.

Session 49's tests purged a store with nothing quarantined, where only ``manual_run``'s
check is reached: with a quarantined record, ``purge_candidates`` compares the naive
cutoff with the stored (zoned) quarantine times first, a TypeError. Kills ``purge``'s own
``_zoned`` dropped. The real SQLite store.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memlife.errors import InputError
from memlife.quarantine import purge
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_guards_session35 import T0, rec


def test_a_purge_at_a_naive_time_with_a_record_quarantined_is_an_input_error(
    tmp_path: Path,
) -> None:
    naive = datetime(2026, 11, 1, 12)
    with SqliteStore(tmp_path / "m.db") as s:
        s.put_many([rec("m-1", status="quarantined", status_changed_at=T0 - timedelta(days=40))])
        with pytest.raises(InputError, match="without a zone"):
            purge(s, 30, receipts=f"file://{tmp_path}/receipts", now=naive)
        assert s.get("m-1") is not None
