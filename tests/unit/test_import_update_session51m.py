"""Audit 51m (session 51 mutation pass): `import --update` takes the store's lease before
its checks (audit 51vi).

The session's race test lands the erasure before ``_apply_updates`` starts, where the
update run's own lease (taken later, by its manual run) already keeps it out of the
journal by way of the new under-lease re-check; so dropping the lease taken before the
checks went unnoticed. Without it, an erasure landing between an update's check and its
journaling (no lease held yet: another process's `erase` takes it) still had the erased
text journaled as the refused update's payload. Here each check is made while another
writer looks at the store: the lease must be held, by this process, for the import.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import memlife.import_write as import_write
from memlife.lease import OWNER
from memlife.model import utcnow
from tests.support.cli import invoke
from tests.unit.test_update_race_session51vi import line


def test_each_update_is_checked_under_the_stores_lease(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now, backup = tmp_path / "now.jsonl", tmp_path / "backup.jsonl"
    now.write_text(line("m-1", "Phone 555-0100, mobile.") + "\n")
    backup.write_text(line("m-1", "Phone 555-0199.") + "\n")
    assert invoke("import", str(now))[0] == 0
    seen: list[tuple[str, str, str] | None] = []
    original: Callable[..., Any] = import_write.update_conflict

    def looked_at(*args: Any, **kwargs: Any) -> Any:
        other = sqlite3.connect(home / "memlife.db")  # what another writer's acquire reads
        try:
            seen.append(other.execute(
                "SELECT owner, purpose, expires_at FROM leases WHERE name='lifecycle'"
            ).fetchone())  # fmt: skip
        finally:
            other.close()
        return original(*args, **kwargs)

    monkeypatch.setattr(import_write, "update_conflict", looked_at)
    code, out, err = invoke("import", "--update", str(backup), "--json")
    assert code == 0 and json.loads(out)["updated"] == 1, err
    assert len(seen) == 1 and seen[0] is not None, seen
    owner, purpose, expires = seen[0]
    assert owner == OWNER and "import" in purpose, seen
    assert expires > utcnow().isoformat()
