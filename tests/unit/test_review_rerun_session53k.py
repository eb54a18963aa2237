"""Audit 53k (session 53): several LoCoMo nights with a human in the loop (the review queue
across nights, restatements, an erasure). LoCoMo's observations are read from
``../shared/data/locomo10.json`` (never copied here; skipped when absent) and imported as
the data README's lifecycle task says; the nights run through the real CLI on the embedded
SQLite store, offline.

The finding: the scheduler fires a night twice (one cutoff). The rerun commits nothing
and reports the receipt it names: its lifecycle counts (audit 47q), plan (49vii), status
and gate (51iii) are that receipt's. Its review counts were not: it printed its own look
at the queue the first run had just filled, ``review_opened 0, review_carried 1``, where
the night's receipt says ``review_opened 1, review_carried 0``: an operator (or a
dashboard reading the flow's result) sees a night that opened nothing for the reviewers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_review_nights_session50k import LOCOMO, NEWER, OLDER, load, night, observations

pytestmark = pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo data not present")


def receipt_of(summary: dict[str, Any]) -> dict[str, Any]:
    return json.loads(Path(summary["receipt"]).read_text())


def review_counts(counts: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in counts.items() if k.startswith("review_")}


def test_a_rerun_of_a_completed_night_prints_the_review_counts_its_receipt_holds(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sam's check-up and his friends mocking his weight (conv-49): night 1 opens one
    POSSIBLE_UPDATE item. The same night again (same cutoff) must print what its receipt
    says: one item opened, none carried."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    load(home, "night1.jsonl", list(observations(OLDER, NEWER).values()))
    first = night(0)
    assert first["other_counts"]["review_opened"] == 1
    again = night(0)
    assert again["other_counts"]["rerun_of_completed_run"] == 1
    assert again["receipt"] == first["receipt"]
    kept = receipt_of(again)["other_counts"]
    assert review_counts(again["other_counts"]) == review_counts(kept), (
        again["other_counts"],
        kept,
    )


def test_control_the_first_night_prints_its_receipts_review_counts(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: a night that runs once prints the review counts its receipt holds, and
    the night after (another cutoff) carries the item as its own look says."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    load(home, "night1.jsonl", list(observations(OLDER, NEWER).values()))
    first = night(0)
    assert review_counts(first["other_counts"]) == review_counts(receipt_of(first)["other_counts"])
    second = night(1)
    assert second["receipt"] != first["receipt"]
    assert second["other_counts"]["review_carried"] == 1
    assert second["other_counts"]["review_opened"] == 0
    assert review_counts(second["other_counts"]) == review_counts(
        receipt_of(second)["other_counts"]
    )
