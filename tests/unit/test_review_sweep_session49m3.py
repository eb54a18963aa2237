"""Audit 49m3 (session 49, mutation pass): review_sweep's ``looks_like_update`` clearing
(audit 49v) reads the pair the way the night paired it: the newer text first. Read the other
way round, a real update's item ("Sam moved out of the flat in Boston" replacing "Sam lives
in a flat in Boston") reads as no update and is closed on the next night, never asked."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from tests.unit.test_update_cue_session49 import NIGHT, _night_items, _ok


def test_a_real_updates_item_stays_open_the_next_night(home: Path) -> None:
    pairs = [("Sam lives in a flat in Boston.", "Sam moved out of the flat in Boston.")]
    assert _night_items(home, pairs) == [("conv-x-speaker0-0", "conv-x-speaker0-1")]

    # the next night pairs nothing (a stricter update floor): the item is the sweep's to judge
    # (the texts still read as an update; the newer record is active: it stays open)
    root = Path(__file__).resolve().parents[2]
    policy = home / "strict.yaml"
    text = (root / "policies" / "default.yaml").read_text()
    assert "  update_cosine: 0.5\n" in text
    text = text.replace("  update_cosine: 0.5\n", "  update_cosine: 0.999\n")
    policy.write_text(text.replace('version: "', 'version: "strict-', 1))
    when = (NIGHT + timedelta(days=1)).isoformat()
    _ok("run", "--engine", "local", "--now", when, "--policy", str(policy), "--json")

    items = json.loads(_ok("review", "list", "--json"))
    assert [(i["record_id"], i["pair_id"]) for i in items] == [
        ("conv-x-speaker0-0", "conv-x-speaker0-1")
    ]
