"""Audit 52d (session 52): the nightly flow's returned counts against its receipt's.

The nightly flow in-process under the session's Prefect test harness on the embedded
SQLite store (a seeded demo store, no model key: the extractive consolidator). What the
flow returns is what a deployment's caller, a parent flow or ``run_deployment`` gets (and
what the Prefect UI shows as its result); the receipt is the evidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.lifecycle import CUTOFF, seed


def _night(home: Path, actors: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    from flows.nightly import nightly

    seed(home / "memlife.db", records=60)
    out = nightly({"dry_run": False, "now": CUTOFF.isoformat(), "actors": actors})
    result = out if isinstance(out, dict) else out.result()
    receipt = json.loads(Path(result["receipt"].removeprefix("file://")).read_text())
    return result, receipt


def test_a_flow_run_with_an_unmatched_actor_returns_its_receipts_counts(
    offline_home: Path, prefect_harness: None
) -> None:
    """Careless operator: a manual trigger of the nightly deployment names one real actor
    and one mistyped (``u-zzz``). Must hold: the flow returns the counts its receipt holds,
    the unmatched actor's ``scope_unmatched:--actor=u-zzz`` included (session 29 made a
    typo'd scope counted, not a quiet night). Today only the receipt carries it: the flow's
    result (and whatever reads it) says nothing of the actor that matched no record."""
    result, receipt = _night(offline_home, ["u-000001", "u-zzz"])
    assert receipt["other_counts"]["scope_unmatched:--actor=u-zzz"] == 1
    assert result["other_counts"] == receipt["other_counts"]
    assert result["lifecycle"] == receipt["counts"]


def test_control_a_matched_scope_returns_its_receipts_counts(
    offline_home: Path, prefect_harness: None
) -> None:
    """Control: every actor named exists; the flow's counts and its receipt's agree."""
    result, receipt = _night(offline_home, ["u-000001"])
    assert not any(k.startswith("scope_unmatched") for k in receipt["other_counts"])
    assert result["other_counts"] == receipt["other_counts"]
    assert result["lifecycle"] == receipt["counts"]
    assert result["counts"] == receipt["planned"] and result["records"] == receipt["records_found"]
