"""Session 46 (the "Left" entry of audit 45i): a member edited in the instant between the
supersede applier's own read and its write. Session 45 withdrew a group whose source moved
after the replacement's write by reading the sources again before the supersedes; an edit
landing after that read still let the others be superseded, and the replacement kept serving
the text the edited member no longer says. The supersedes of a group not yet begun are now
checked and written in one store transaction: a source no longer as read withdraws the group.

The night merges "Berlin" (older, m-1) with "Berlin" (newer, m-2). The agent rewrites m-2
("Lisbon", LangGraph `put` in another process) right after the applier has read the sources.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from memlife.apply.appliers import status as status_applier
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.unit.test_night_races_session45 import (
    NEW,
    NIGHT,
    OLD,
    _active_texts,
    _edit,
    _policy,
    _seed,
)


def test_a_member_edited_between_the_supersedes_read_and_write_withdraws_the_group(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What must hold: no member is superseded, the replacement is taken back under a
    receipted delete, "Lisbon" stays active and served, the night's receipts verify, and
    the next night (unraced) leaves an active record saying "Lisbon"."""
    db = home / "memlife.db"
    _seed(db)
    policy = _policy(tmp_path)
    raced: list[bool] = []
    real = status_applier.get_many

    def read_then_edit(store: object, ids: list[str]) -> dict[str, object]:
        found = real(store, ids)  # type: ignore[arg-type]
        if "m-2" in ids and not raced:  # the applier has read m-2 as it was
            _edit(db)
            raced.append(True)
        return found  # type: ignore[return-value]

    monkeypatch.setattr(status_applier, "get_many", read_then_edit)
    night = run_local(RunConfig(dry_run=False, now=NIGHT, policy=policy)).as_json()
    monkeypatch.setattr(status_applier, "get_many", real)
    assert raced, "the race did not happen"
    with SqliteStore(db) as store:
        m1, m2 = store.get("m-1"), store.get("m-2")
        assert (m1.status.value, m2.status.value) == ("active", "active")
        assert m2.content == NEW
    assert sorted(_active_texts(db)) == sorted([OLD, NEW])  # the replacement taken back
    assert night["other_counts"].get("consolidation_withdrawn_changed") == 1, night
    code, out, _ = invoke("receipts", "verify", str(night["run_id"]))
    assert code == 0, out
    run_local(RunConfig(dry_run=False, now=NIGHT + timedelta(days=1), policy=policy,
                        allow_future_cutoff=True))  # fmt: skip
    texts = _active_texts(db)
    assert NEW in texts and OLD in texts, texts
