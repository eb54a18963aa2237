"""Session 46 (audit 46a): an interrupted `import --update` (session 45, audit 45h: UPDATE_ABANDONED).
Another run's retry queue ends an import's left-over line only where it differs from the
record as it is now; a line the record already holds is done, not abandoned."""

from __future__ import annotations

import json
from pathlib import Path

from memlife.model import MemoryRecord
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.records import good
from tests.unit.test_cli_session45 import IDS, _interrupt, _lines


def test_an_interrupted_update_the_record_already_holds_is_finished_not_abandoned(
    home: Path, tmp_path: Path
) -> None:
    """The operator hits Ctrl-C on `import A --update` after its first batch (the last
    line planned, not written), then imports the same lines again as file B: every record
    holds A's line. The cron's `run --retry-only` meets A's planned line, which the record
    already says: it is the same update, finished (exit 0, nothing failed), never a
    terminal UPDATE_ABANDONED failure listed for an operator (mutant: `and old != new`
    dropped from memlife/apply/appliers/update.py)."""
    home.mkdir(parents=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([MemoryRecord.model_validate(good(i)) for i in IDS])
    file_a = _lines(tmp_path / "a.jsonl", "team-a")
    file_b = tmp_path / "b.jsonl"
    file_b.write_text(file_a.read_text())

    stopped = _interrupt(home, "import", str(file_a), "--update", point="before_receipt")
    assert stopped.returncode == 130 and "Traceback" not in stopped.stderr, stopped.stderr
    code, out, err = invoke("import", str(file_b), "--update", "--json")
    assert code == 0, err
    code, out, err = invoke("run", "--retry-only", "--json")
    assert code == 0, out + err
    assert not json.loads(out).get("failed_ids"), out
    with SqliteStore(home / "memlife.db") as store:
        assert {r.owner for i in IDS if (r := store.get(i)) is not None} == {"team-a"}
