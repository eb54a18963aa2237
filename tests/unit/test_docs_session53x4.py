"""Audit 53x4 (session 53: the documentation tells the truth), held against real receipts.

docs/receipts.md and docs/evaluation.md are where an operator or a compliance reviewer reads
what a run receipt's sections mean. Followed against real evidence:

1. The receipt's `gate` section carries keys no doc names: `held_back` (the deletions,
   groups and quarantined records the verdict kept from the store: the figures the gate
   line prints), `eval_digest` (the set the verdict judged), and a run without a set's
   `withheld_deletions` / `withheld_groups` (README and evaluation.md say only "with the
   withheld counts"). docs/evaluation.md's list of the verdict's fields read as the whole
   list.
2. `other_counts` was named in the receipt's field list and nowhere explained: 57 of the
   65 counters the code writes there were in neither receipts.md nor evaluation.md (44 in
   no doc: `review_opened`, `review_carried`, `merged_duplicates`,
   `gate_withheld_deletions`, `consolidation_to_review`, ...), 10 of them on a plain
   default night over the demo store.
3. A manual run's `counts` are the executor's outcome tallies (`reviewed_by_person`,
   `held_placed`, `restored`, `released`, ...), not a night's lifecycle counts; receipts.md
   listed only the night's (processed .. failed) and described a manual receipt's `counts`
   by nothing but its name, so a query for `counts.reviewed` of a review run reads nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.cli import invoke

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "docs" / "receipts.md", REPO / "docs" / "evaluation.md"]


def _documented() -> str:
    return "\n".join(p.read_text() for p in DOCS)


def _undocumented(keys: set[str]) -> list[str]:
    text = _documented()
    # a dynamic key (review_reason:<CODE>) is documented by its prefix
    return sorted(k for k in keys if f"`{k.split(':')[0]}" not in text)


def _receipt(home: Path, mode: str) -> dict[str, object]:
    (path,) = (home / "receipts").rglob(f"runs/*/*/*/*-{mode}-*/receipt.json")
    return dict(json.loads(path.read_text()))


def _night(home: Path, *args: str) -> dict[str, object]:
    code, _, err = invoke("run", "--engine", "local", "--now", "2026-12-01T00:00:00Z", *args)
    assert code == 0, err
    return _receipt(home, "apply")


# -- 1. the gate section's keys ------------------------------------------------------------


def test_a_gate_without_a_set_carries_only_documented_keys(home: Path) -> None:
    assert invoke("demo", "--records", "300", "--seed", "7")[0] == 0
    gate = _night(home)["gate"]
    assert isinstance(gate, dict) and gate["reasons"] == ["GATE_NOT_CONFIGURED"]
    assert _undocumented(set(gate)) == []


def test_a_gate_with_a_set_carries_only_documented_keys(home: Path, tmp_path: Path) -> None:
    assert invoke("demo", "--records", "300", "--seed", "7")[0] == 0
    cases = tmp_path / "cases.yaml"
    code, _, err = invoke("eval", "init", "-o", str(cases), "--now", "2026-12-01T00:00:00Z")
    assert code == 0, err
    gate = _night(home, "--eval-cases", str(cases))["gate"]
    assert isinstance(gate, dict) and gate["configured"] is True
    assert {"held_back", "eval_digest", "gates"} <= set(gate)
    assert _undocumented(set(gate)) == []


def test_the_gate_keys_documented_before_are_still_found() -> None:
    """Control: the check reads the docs it is meant to (keys documented before this audit)."""
    assert _undocumented({"blocking_actors", "unreadable_cases", "ungated_deletions"}) == []
    assert _undocumented({"no_such_key"}) == ["no_such_key"]


# -- 2. other_counts -------------------------------------------------------------------------

_COUNT = re.compile(r"counts\[f?\"([a-z_]+:?)")


def other_count_keys() -> set[str]:
    """Every key memlife writes into a tally's or the review queue's counts (``counts["k"]``
    and ``counts[f"k:{...}"]``), the lifecycle counts aside."""
    lifecycle = {"processed", "retained", "consolidated", "superseded", "deleted",
                 "quarantined", "reviewed", "held", "failed"}  # fmt: skip
    found = {m.group(1) for p in (REPO / "memlife").rglob("*.py")
             for m in _COUNT.finditer(p.read_text())}  # fmt: skip
    return found - lifecycle


def test_the_count_scan_finds_the_counts_it_is_for() -> None:
    """Control: the scan is not vacuous (counters documented before this audit are in it)."""
    found = other_count_keys()
    assert {"review_waiting", "review_asked_again", "shard_stopped_records"} <= found
    assert "review_reason:" in found  # the dynamic one, by its prefix
    assert len(found) > 50


def test_every_other_count_the_code_writes_is_documented() -> None:
    assert _undocumented(other_count_keys()) == []


def test_a_default_nights_other_counts_are_documented(home: Path) -> None:
    assert invoke("demo", "--records", "300", "--seed", "7")[0] == 0
    other = _night(home)["other_counts"]
    assert isinstance(other, dict) and other  # the night counted something
    assert _undocumented(set(other)) == []


# -- 3. a manual run's counts ------------------------------------------------------------------


def _lines(path: Path) -> Path:
    rows = [{"id": rid, "actor_id": "u1", "namespace": "/users/u1/facts",
             "memory_type": "semantic", "subject": s, "content": c, "owner": "team",
             "created_at": "2026-01-02T10:00:00Z"}
            for rid, s, c in (("a1", "tea", "Drinks only green tea."),
                              ("a2", "city", "Lives in Oslo."))]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_manual_runs_counts_are_documented(home: Path, tmp_path: Path) -> None:
    assert invoke("import", str(_lines(tmp_path / "in.jsonl")))[0] == 0
    assert invoke("hold", "place", "--id", "a2")[0] == 0
    assert invoke("hold", "release", "--id", "a2")[0] == 0
    keys: set[str] = set()
    for path in (home / "receipts").glob("runs/*/*/*/manual-*/receipt.json"):
        keys |= set(json.loads(path.read_text())["counts"])
    assert {"held_placed", "released"} <= keys
    assert _undocumented(keys) == []
