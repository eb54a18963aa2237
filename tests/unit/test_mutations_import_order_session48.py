"""Session 48 (audit 48m): the skipped lines of `memlife import --update` in line order
(memlife/importer.py::_in_line_order), through the real CLI over a real SQLite store."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.records import good
from tests.unit.test_import_export import write_jsonl
from tests.unit.test_import_session48 import _import


def test_an_update_conflict_is_reported_in_its_line_order(home: Path, tmp_path: Path) -> None:
    """Weak test (mutant: the `report.conflicts.sort` in `_in_line_order` removed). The
    file's line 1 updates m-a under another actor (ACTOR_MISMATCH, found once the updates
    run, after the batches); line 3 repeats line 2's id (DUPLICATE_ID, found in its batch).
    The report lists the skipped lines by line number, whatever step found them."""
    db = tmp_path / "s.db"
    _import(write_jsonl(tmp_path / "seed.jsonl", [json.dumps(good("m-a"))]), db)
    lines = [good("m-a", actor_id="u-2", namespace="/users/u-2/preferences"), good("m-n"),
             good("m-n")]  # fmt: skip
    out = _import(write_jsonl(tmp_path / "u.jsonl", [json.dumps(d) for d in lines]), db, "--update")
    assert [(c["line"], c["code"]) for c in out["conflicts"]] == [
        (1, "ACTOR_MISMATCH"), (3, "DUPLICATE_ID")
    ]  # fmt: skip
