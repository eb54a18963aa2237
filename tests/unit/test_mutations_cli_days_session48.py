"""Session 48 (audit 48m): `receipts history` and `receipts list` over a one-day range (memlife/cli/
receipts.py ``_days``, audit 48iv), through the real CLI over a real SQLite store and the
home's file receipts, as the session-48 CLI tests run them."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import invoke
from tests.unit.test_cli_session48 import _runs, _seed


def test_a_range_of_one_day_is_read_not_refused(home: Path) -> None:
    """Weak test (mutant: `first >= last` in `_days`). A reviewer asks for the day of a
    hold: `--since` and `--until` name the same day. That range holds one day, the hold's:
    both commands answer with it (exit 0), only a reversed range is refused."""
    _seed(home, "m-1")
    code, _, err = invoke("hold", "place", "--id", "m-1")
    assert code == 0, err
    (run,) = _runs(home)
    day = "-".join(run.parts[-4:-1])
    code, out, err = invoke("receipts", "history", "m-1", "--since", day, "--until", day)
    assert code == 0 and "m-1" in out, err
    code, out, err = invoke("receipts", "list", "--since", day, "--until", day, "--json")
    assert code == 0 and run.name in out, (out, err)
