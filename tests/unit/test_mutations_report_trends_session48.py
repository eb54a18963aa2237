"""Session 48 (audit 48m): the run report page's trends over planted receipts (memlife/report_html.py
``_counts`` and the stopped-runs line in ``render``), as audit 48a's tests plant them: a
run folder of the day before under new keys, the real file sink, real nights on SQLite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memlife.audit import open_sink
from tests.unit.test_report_trends_session48 import _run, _seed, _trends

FOLDER = "runs/2026/11/01/20261101T120000Z-dry-0123456789"


def _plant(**figures: Any) -> None:
    receipt = {"mode": "dry_run", "status": "success", "cutoff": "2026-11-01T12:00:00+00:00",
               "counts": {"retained": 1}, "planned": {"delete_pending": 1},
               "records_found": 1, **figures}  # fmt: skip
    receipt = {k: v for k, v in receipt.items() if v is not ...}
    sink = open_sink()
    sink.put_new(f"{FOLDER}/manifest.json", b'{"mode": "dry_run"}', "application/json")
    sink.put_new(f"{FOLDER}/receipt.json", json.dumps(receipt).encode(), "application/json")


@pytest.mark.parametrize(
    "figures",
    [{"counts": {"retained": -500}}, {"planned": {"delete_pending": float("nan")}},
     {"planned": {"delete_pending": True}}],
    ids=["negative-count", "nan-planned", "bool-planned"],
)  # fmt: skip
def test_a_planted_receipt_whose_counts_are_no_counts_is_no_point_of_the_trend(
    home: Path, figures: dict
) -> None:
    """Weak test (mutants in `_counts`: `v >= 0` dropped, `planned` values not read,
    `isinstance` for `type(...) is int`). The adversary plants a receipt with a negative
    count, a NaN or a `true` among its planned changes: no run counted that, so the next
    night's trend is of the two real nights only."""
    _seed(home)
    _run(0)
    _plant(**figures)
    assert "Trends (last 2 dry runs)" in _trends(_run(1))


@pytest.mark.parametrize("status", ["partial_failure", ...], ids=["partial", "no-status"])
def test_a_night_that_ran_to_its_end_is_not_named_as_stopped(home: Path, status: Any) -> None:
    """Weak test (mutants: `partial_failure` or a receipt without `status`, from before
    receipts carried one, in the stopped list). A night that sealed a partial failure (some
    shards failed, the rest ran) or an older receipt is drawn, not named "not complete"."""
    _seed(home)
    _run(0)
    _plant(status=status)
    trends = _trends(_run(1))
    assert "Trends (last 3 dry runs)" in trends and "not complete" not in trends


def test_a_stopped_night_is_named_by_its_day_and_status(home: Path) -> None:
    """Weak test (mutant: the stopped-runs line without the cutoff). The planted night of
    2026-11-01 stopped (`failure`, no `records_found`): the page names the day with it."""
    _seed(home)
    _run(0)
    _plant(status="failure", records_found=...)
    assert "not complete: 2026-11-01 failure" in _trends(_run(1))
