"""Audit 53tm (session 53: time as the calendar and the clock attack it): the reference time
of `memlife quarantine purge --now`, near the calendar's first years.

`run --now` refuses a cutoff more than 100 years before the clock (audit 37: year 1
overflowed after the manifest was written; year 26, a typo of 2026, ran under the id
"261201T..." and the folder ``runs/26/``). The purge's ``--now`` had no such bound:

1. ``--older-than 7 --now 0001-01-03T00:00:00Z`` (preview or ``--yes``) ended
   ``error: OverflowError: date value out of range`` (exit 1) naming no option:
   ``purge_candidates`` works out ``now - older_than`` before it reads anything;
2. ``--older-than 0 --now 0026-12-01T00:00:00Z --yes`` wrote a manual run, manifest and
   ``success`` receipt, under ``runs/26/12/01/manual-261201T000000000000Z-...``: a folder
   no day lookup reaches. ``receipts verify`` of that run said RUN_NOT_FOUND, and as the
   store's latest run (the run chain) ``receipts verify latest`` said LATEST_RUN_MISSING:
   an alarm that the store's newest evidence is gone, while it sits in the bucket.

The real SQLite store, the CLI in process, receipts in a folder.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.errors import InputError
from memlife.model import utcnow
from memlife.quarantine import purge
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.unit.test_guards_session35 import POLICY, rec

FAR_BACK = "0001-01-03T00:00:00Z"
YEAR_26 = "0026-12-01T00:00:00Z"  # 2026 with its first two digits lost


def _store(home: Path) -> str:
    """A store holding one record quarantined 40 days ago (the purge's candidate)."""
    home.mkdir(parents=True, exist_ok=True)
    at = utcnow() - timedelta(days=40)
    with SqliteStore(home / "memlife.db") as s:
        s.put_many([rec("m-1", status="quarantined", created_at=at - timedelta(days=1),
                        status_changed_at=at)])  # fmt: skip
    return f"sqlite:///{home / 'memlife.db'}"


def _purge(url: str, *args: str) -> tuple[int, str]:
    code, out, err = invoke("quarantine", "purge", "--store", url, "--policy", POLICY, *args)
    return code, out + err


@pytest.mark.parametrize("yes", [(), ("--yes",)], ids=["preview", "yes"])
def test_a_purge_time_near_year_one_is_refused_naming_now(home: Path, yes: tuple[str, ...]) -> None:
    url = _store(home)
    code, said = _purge(url, "--older-than", "7", "--now", FAR_BACK, *yes)
    assert "OverflowError" not in said
    assert code == 2 and "now" in said, said
    with SqliteStore(home / "memlife.db") as s:
        assert s.get("m-1") is not None


def test_a_purge_time_in_year_26_writes_no_run_that_verify_cannot_find(home: Path) -> None:
    url = _store(home)
    code, said = _purge(url, "--older-than", "0", "--now", YEAR_26, "--yes", "--json")
    latest = invoke("receipts", "verify", "latest", "--store", url, "--json")
    problems = {p["code"] for p in json.loads(latest[1])["problems"]} if latest[1] else set()
    assert "LATEST_RUN_MISSING" not in problems, problems
    assert not (home / "receipts" / "runs" / "26").exists()
    assert code == 2, said


def test_the_library_purge_refuses_a_time_near_year_one(home: Path) -> None:
    _store(home)
    with SqliteStore(home / "memlife.db") as s:
        with pytest.raises(InputError, match="now"):
            purge(s, 7, policy=POLICY, now=datetime(1, 1, 3, tzinfo=UTC))
        assert s.get("m-1") is not None


def test_control_a_purge_at_a_time_near_now_is_found_by_verify(home: Path) -> None:
    """A reference time a day back (a replay) still purges, and its run verifies."""
    url = _store(home)
    day_back = (utcnow() - timedelta(days=1)).isoformat()
    code, said = _purge(url, "--older-than", "30", "--now", day_back, "--yes", "--json")
    assert code == 0, said
    run = json.loads(said[said.index("{") :])
    assert run["status"] == "success"
    with SqliteStore(home / "memlife.db") as s:
        assert s.get("m-1") is None  # purged, 40 days in quarantine
    code, out, _ = invoke("receipts", "verify", run["run_id"], "--store", url, "--json")
    assert code == 0 and json.loads(out)["ok"], out
