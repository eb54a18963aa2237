"""Audit 43f (session 43): ``delete._still_superseded`` re-checks an expired record's deadline at the
write (session 43: a record written again since the plan keeps a later one). The planner
calls a deadline at the cutoff itself past (``expires <= now``); the re-check must agree,
or a record due at the very second of the cutoff is planned, then kept, every night."""

from __future__ import annotations

import json
from pathlib import Path

from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.records import good
from tests.unit.test_import_export import write_jsonl

CUTOFF = "2026-11-01T00:00:00Z"


def test_a_deadline_at_the_cutoff_itself_is_deleted_as_planned(home: Path, tmp_path: Path) -> None:
    """m-due's expires_at is the night's cutoff to the second (a legal deadline set to
    midnight, the night run at midnight); m-later's is a second after. What must hold:
    m-due is deleted (HARD_EXPIRED, an obligation), m-later stays."""
    rows = [good("m-due", expires_at=CUTOFF, subject="a"),
            good("m-later", expires_at="2026-11-01T00:00:01Z", subject="b")]  # fmt: skip
    code, _, err = invoke("import", str(write_jsonl(tmp_path / "r.jsonl", map(json.dumps, rows))))
    assert code == 0, err
    code, out, err = invoke("run", "--engine", "local", "--now", CUTOFF, "--json")
    assert code == 0, err
    assert json.loads(out)["lifecycle"]["deleted"] == 1
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("m-due") is None
        assert store.get("m-later") is not None
