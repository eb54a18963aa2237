"""Audit 43t (session 43): an access-ledger part cut short (a full disk, a partial copy of the home) is
named and left out of every read since 43q. A cut-short part that was itself written by a
compaction or an erasure (``part-r-*``: a replacing part, whose metadata names what it
replaced) must be left out by the ledger's writers too."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlife.ledger import AccessLedger

NS = "/users/a/facts"


def test_a_cut_short_replacing_part_does_not_stop_an_erasure(tmp_path: Path) -> None:
    """The adversary: a compaction folded a day's parts into one ``part-r-*`` part, and a
    partial copy of the home cut that part short. Reads name it and go on (43q). A user
    then asks to erase r2, whose reads are in a readable part of another day. Must hold:
    the erasure removes those reads (it warns about the cut part, as reads do) instead of
    failing on the cut part's footer every time it is asked."""
    ledger = AccessLedger(tmp_path / "ledger")
    day1 = datetime(2025, 5, 1, 10, tzinfo=UTC)
    ledger.append("a", NS, "r1", at=day1)
    ledger.flush()
    ledger.append("a", NS, "r1", at=day1)
    ledger.flush()
    assert ledger.compact(before="2025-05-02") == {"2025-05-01": 2}
    (folded,) = ledger.files()
    assert Path(folded).name.startswith("part-r-")
    Path(folded).write_bytes(Path(folded).read_bytes()[:40])  # cut short
    ledger.append("a", NS, "r2", at=datetime(2025, 5, 2, 10, tzinfo=UTC))
    ledger.flush()
    with pytest.warns(RuntimeWarning, match="unreadable part"):
        assert ledger.erase(["r2"]) == 1
    with pytest.warns(RuntimeWarning, match="unreadable part"):
        assert ledger.read().num_rows == 0
