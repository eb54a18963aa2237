"""Audit 48a: the run report page's trends over a hostile or gappy receipts location
(memlife/report_html.py::history, ::render).

Real nights over a real SQLite store (``run_local``), the real file receipt sink, faults
armed with ``memlife.faults.inject``; objects are planted only where a create-only bucket
accepts them (new keys). Session 48 (audit 48a): each failed before its fix, but the last
(a run before manifests named the store, which a mutation of ``history`` let drop)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.audit import open_sink
from memlife.demo import generate
from memlife.errors import InjectedFault
from memlife.faults import inject
from memlife.pipeline import RunConfig, RunSummary, run_local
from memlife.stores.sqlite import SqliteStore

ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)


def _seed(home: Path, n: int = 120) -> None:
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many(list(generate(n, seed=11, anchor=ANCHOR, markers=True)))


def _run(days: int, *, dry: bool = True) -> RunSummary:
    at = ANCHOR + timedelta(days=days)
    return run_local(RunConfig(dry_run=dry, now=at, consolidate=False, workers=1))


def _trends(summary: RunSummary) -> str:
    assert summary.report_html, "no report page written"
    html = Path(summary.report_html).read_text()
    return html[html.index("<h2>Trends") :]


def test_a_run_copied_under_another_day_or_a_subfolder_is_not_drawn_twice(home: Path) -> None:
    """The adversary copies a real run's manifest and receipt under another day's folder and
    into a subfolder of the run (new keys: a create-only bucket takes them). `receipts
    list` lists neither copy (`verify`: RUN_FOLDER_MISPLACED); the next night's trend must
    not draw them either: two nights ran, so the trend is of two runs."""
    _seed(home)
    first = _run(0)
    sink = open_sink()
    own = "runs/" + Path(first.manifest).parent.as_posix().split("/runs/")[1]
    for name in ("manifest.json", "receipt.json"):
        body = (Path(first.manifest).parent / name).read_bytes()
        sink.put_new(f"runs/2026/11/05/{first.run_id}/{name}", body, "application/json")
        sink.put_new(f"{own}/copy/{name}", body, "application/json")
    assert "Trends (last 2 dry runs)" in _trends(_run(1))


def test_a_failed_night_is_named_not_drawn_as_zero_records_processed(home: Path) -> None:
    """An apply night fails part way (its deletes stop at the first one) and is sealed as
    `failure` with the counts of what it did, but no `records_found`. The next night's
    page drew it as a night that processed 0 records, beside 120 before and after, and said
    nowhere that it failed: the trend must not read a failure as zero, and must name it."""
    _seed(home)
    _run(0, dry=False)
    with pytest.raises(InjectedFault), inject("after_delete"):
        _run(30, dry=False)
    trends = _trends(_run(60, dry=False))
    processed = trends.split("<figcaption>records processed per run")[1]
    (points,) = re.findall(r'<polyline points="([^"]+)"', processed)
    baseline = "190.0"  # top_pad + plot_h of the 220-high chart: a value of 0
    assert all(p.split(",")[1] != baseline for p in points.split()), points
    assert "failure" in trends


@pytest.mark.parametrize(
    "figures",
    [{"records_found": float("nan")}, {"records_found": "many"}, {"planned": None}],
    ids=["nan", "text", "null-planned"],
)
def test_a_planted_receipt_with_figures_that_are_no_counts_leaves_the_page_whole(
    home: Path, figures: dict
) -> None:
    """The adversary plants a run folder for the day before (new keys) whose receipt holds a
    figure that is no count: NaN (Python's json reads it), a word, a null. Every night of
    the next fourteen lost its report page (the error is caught and only logged), or drew
    `nan` coordinates, which a browser drops with the whole line. The page must be written,
    its charts of numbers only."""
    _seed(home)
    _run(0)
    folder = "runs/2026/11/01/20261101T120000Z-dry-0123456789"
    receipt = {"mode": "dry_run", "status": "success", "cutoff": "2026-11-01T12:00:00+00:00",
               "counts": {"retained": 1}, "planned": {"delete_pending": 1},
               "records_found": 1, **figures}  # fmt: skip
    sink = open_sink()
    sink.put_new(f"{folder}/manifest.json", b'{"mode": "dry_run"}', "application/json")
    sink.put_new(f"{folder}/receipt.json", json.dumps(receipt).encode(), "application/json")
    trends = _trends(_run(1))
    assert "nan" not in trends.lower()


def test_a_run_from_before_manifests_named_the_store_still_counts_in_the_trend(
    home: Path,
) -> None:
    """Weak test (mutant: `if store and run.store != store` in
    `memlife/report_html.py::history`: every run from before manifests named their store
    left out of each store's trend, so an upgrade restarted every trend). A run folder of
    the day before, as an older memlife wrote it (its manifest names no store), is one
    point of the next night's trend."""
    _seed(home)
    first = _run(0)
    folder = Path(first.manifest).parent
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest.pop("store_identity")
    old = "runs/2026/10/31/20261031T000000Z-dry-0123456789"
    receipt = json.loads((folder / "receipt.json").read_text())
    receipt.update(run_id=old.rsplit("/", 1)[1], cutoff="2026-10-31T00:00:00+00:00")
    sink = open_sink()
    sink.put_new(f"{old}/manifest.json", json.dumps(manifest).encode(), "application/json")
    sink.put_new(f"{old}/receipt.json", json.dumps(receipt).encode(), "application/json")
    trends = _trends(_run(1))
    assert "Trends (last 3 dry runs)" in trends and "2026-10-31" in trends
