"""The run report page: beside the receipts, content-free, right figures, rendered by Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.demo import generate
from memlife.pipeline import RunConfig, RunSummary, markdown_summary, run_local
from memlife.report_html import Breakdown, breakdown, namespace_pattern, render
from memlife.stores.sqlite import SqliteStore
from tests.support.png import count_colour, read_png

ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)
N = 300


@pytest.fixture(name="seeded")
def _seeded(home: Path) -> list:
    home.mkdir(parents=True, exist_ok=True)
    records = list(generate(N, seed=11, anchor=ANCHOR, markers=True))
    with SqliteStore(home / "memlife.db") as store:
        store.put_many(records)
    return records


def dry_run(at: datetime = ANCHOR) -> RunSummary:
    return run_local(RunConfig(dry_run=True, now=at, consolidate=False, workers=1))


def figures(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-figure="([^"]+)"[^>]*>([^<]*)<', html))


def test_page_beside_receipts_without_content(seeded: list, home: Path) -> None:
    summary = dry_run()
    page = Path(summary.report_html)
    assert page.name == "report.html" and page.parent == Path(summary.manifest).parent
    html = page.read_text()
    for r in seeded:  # no content, no canary, no record id
        assert r.content not in html and r.id not in html
    for actor in {r.actor_id for r in seeded}:
        assert actor not in html  # namespaces appear as patterns: /users/*/...
    got = figures(html)
    assert got["records"] == f"{N:,}" and got["status"] == summary.status
    assert got["gate"] == "not configured" and got["model-calls"] == "0"
    # net of the judgements an apply run's gate would withhold without a set (session 30)
    withheld = summary.gate["withheld_deletions"]
    deletes = summary.counts["delete_expired"] + summary.counts["delete_pending"] - withheld
    assert withheld > 0 and got["would-delete"] == f"{deletes:,}"
    assert "an apply run would" in html


def test_self_contained_and_escaped() -> None:
    evil = "<script>alert(1)</script>"
    detail = Breakdown(by_namespace={f"/t/{evil}": Counter(retain=3)})
    detail.reasons[evil] = 2
    summary = {
        "run_id": evil,
        "mode": "dry_run",
        "status": "success",
        "records": 3,
        "counts": {"retain": 3},
        "policy_version": evil,
    }
    html = render(summary, detail, [])
    assert "<script" not in html and "&lt;script&gt;" in html
    for remote in ("src=", "href=", "@import", "url(", "http://", "https://"):
        assert remote not in html.replace('xmlns="http://www.w3.org/2000/svg"', ""), remote


def test_breakdown_matches_the_report_rows(seeded: list) -> None:
    summary = dry_run()
    detail = breakdown(summary.report_parquet)
    rows = [json.loads(x) for x in Path(summary.report).read_text().splitlines()]
    by_action: dict[str, int] = {}
    for c in detail.by_namespace.values():
        for k, v in c.items():
            by_action[k] = by_action.get(k, 0) + v
    assert by_action == {k: v for k, v in summary.counts.items() if v}
    expected_reasons: dict[str, int] = {}
    for r in rows:
        for code in r["reasons"]:
            expected_reasons[code] = expected_reasons.get(code, 0) + 1
    assert dict(detail.reasons) == expected_reasons
    assert all("*" in p for p in detail.by_namespace)


def test_breakdown_read_in_small_batches_equals_one_pass(seeded: list) -> None:
    # the breakdown streams the Parquet: batches of 3 rows must add up to the same counts
    summary = dry_run()
    whole, batched = breakdown(summary.report_parquet), breakdown(summary.report_parquet, 3)
    assert sum(sum(c.values()) for c in batched.by_namespace.values()) == summary.records > 3
    assert batched.by_namespace == whole.by_namespace and batched.reasons == whole.reasons


def test_namespace_pattern() -> None:
    assert namespace_pattern("u-1", "/users/u-1/prefs") == "/users/*/prefs"
    assert namespace_pattern("u-1", "/teams/t-9/u-10") == "/teams/t-9/u-10"


def test_trends_after_two_runs_and_apply_figures(seeded: list) -> None:
    first = dry_run()
    second = dry_run(ANCHOR + timedelta(days=1))
    html = Path(second.report_html).read_text()
    assert "Trends (last 2 dry runs)" in html and html.count("<polyline") >= 2
    assert "trends appear after two runs" in Path(first.report_html).read_text()
    applied = run_local(RunConfig(dry_run=False, now=ANCHOR + timedelta(days=2), consolidate=False))
    got = figures(Path(applied.report_html).read_text())
    assert got["deleted"] == f"{applied.lifecycle['deleted']:,}"
    assert got["superseded"] == f"{applied.lifecycle['superseded']:,}"


def test_dry_run_markdown_says_what_an_apply_would_change(seeded: list) -> None:
    summary = dry_run()
    md = markdown_summary(summary)
    withheld = summary.gate["withheld_deletions"]
    deletes = summary.counts["delete_expired"] + summary.counts["delete_pending"] - withheld
    assert "| an apply run would | records |" in md and f"| delete | {deletes:,} |" in md
    assert f"| withhold, no eval set: deletions | {withheld:,} |" in md and withheld > 0
    assert "regression gate **not configured**" in md and "[Report page](file://" in md


# -- headless Chromium (Debian's package; .ci/run installs it) --------------------------------


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe:
        return exe
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed (.ci/run installs the Debian package)")
    pytest.skip("chromium (Debian package) is not installed on this machine")


def headless(exe: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)


def test_chromium_renders_key_figures_and_charts(seeded: list, tmp_path: Path) -> None:
    exe = chromium()
    dry_run()
    summary = dry_run(ANCHOR + timedelta(days=1))  # with a trend
    url = Path(summary.report_html).resolve().as_uri()

    dom = headless(exe, tmp_path / "p1", "--dump-dom", url).stdout
    got = figures(dom)
    assert got["records"] == f"{N:,}" and got["status"] == summary.status
    assert got["gate"] == "not configured"
    assert dom.count("<rect") >= sum(1 for v in summary.counts.values() if v)

    shot = tmp_path / "report.png"
    headless(exe, tmp_path / "p2", "--window-size=1000,1600", f"--screenshot={shot}", url)
    width, height, rows = read_png(shot)
    assert (width, height) == (1000, 1600)
    bpp = len(rows[0]) // width
    white = count_colour(rows, (255, 255, 255), bpp, tolerance=2)
    assert white < width * height * 0.97, "the page rendered blank"
    # the review bars (#1f77b4) and retain bars (#4c9f70) are drawn when those actions occur
    if summary.counts.get("review"):
        assert count_colour(rows, (0x1F, 0x77, 0xB4), bpp) > 200
    if summary.counts.get("retain"):
        assert count_colour(rows, (0x4C, 0x9F, 0x70), bpp) > 200
