"""Audit 53b: a reviewer's answer on an update pair outlives the pair's newer record.

Audit 50k made a person's `keep` on "B probably replaces A" stand once B is merged with its
word-for-word restatement into a replacement R holding B's very text (the night pairs A
with R, the same question). ``run_planning._stands_for`` proved "R holds B's text" by
reading B itself. B is a superseded original: superseded retention deletes it (90 days by
default, with its receipt). From that night on the proof was gone, so the kept pair was
asked again as a new item (``review_asked_again``), or, with a model key set, handed to
the model, whose `update` superseded A, the record the person kept.

The nights run through the real CLI on LoCoMo's conv-49 (as 50k's do) with a policy whose
superseded retention is 0 days (the same deletion 90 days on, without waiting for the wall
clock, which retention counts: superseded_since.py).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer
from tests.unit.test_review_nights_session50k import (
    LOCOMO,
    NEWER,
    NIGHT1,
    OLDER,
    RESTATED,
    kept_pair_then_restated,
    ok,
    open_items,
    replies,
    status,
)

pytestmark = pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo data not present")


def retention_now(home: Path) -> Path:
    """The default policy with superseded originals deleted the next night, enforced in
    the conversations' namespaces (no evaluation set asked for)."""
    policy = yaml.safe_load(Path("policies/default.yaml").read_text())
    policy["version"] = "audit53b-retention-0"
    policy["superseded_retention_days"] = {"standard": 0, "sensitive": 0}
    policy["enforce_deletion_in"] = ["/conversations/**"]
    policy["gate"]["required"] = False
    path = home / "retention-0.yaml"
    path.write_text(yaml.safe_dump(policy))
    return path


def night(day: int, policy: Path) -> dict[str, Any]:
    now = (NIGHT1 + timedelta(days=day)).isoformat()
    return json.loads(ok("run", "--engine", "local", "--now", now, "--allow-future-cutoff",
                         "--policy", str(policy), "--json"))  # fmt: skip


def restated_then_retired(home: Path) -> tuple[str, Path]:
    """50k's kept pair and merge, then a night that deletes NEWER and its restatement
    (superseded retention): only the replacement holds NEWER's text now."""
    replacement = kept_pair_then_restated(home)
    policy = retention_now(home)
    assert night(2, policy)["lifecycle"]["deleted"] == 2
    with SqliteStore(home / "memlife.db") as s:
        assert s.get(NEWER) is None and s.get(RESTATED) is None
        kept = s.get(replacement)
        assert kept is not None and str(kept.status) == "active"
    return replacement, policy


def test_a_kept_pair_is_not_asked_again_once_its_newer_record_is_retired(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    _, policy = restated_then_retired(home)
    counts = night(3, policy)["other_counts"]
    assert open_items() == [], "the question the reviewer answered is asked again"
    assert counts.get("review_asked_again", 0) == 0
    assert status(home, OLDER) == "active"


def test_a_kept_record_is_not_handed_to_the_model_once_its_pair_is_retired(
    home: Path, monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    replacement, policy = restated_then_retired(home)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    messages_server.set_handler(replies)
    night(3, policy)
    assert status(home, OLDER) == "active", "the model overruled the reviewer's keep"
    assert status(home, replacement) == "active"


def test_control_an_unanswered_pair_is_still_asked_after_the_retirement(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: the journal stands in for the retired record only for an answered pair. A
    pair nobody answered (the reviewer left night 1's item open) is still a question about
    the replacement after NEWER is gone."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    replacement = kept_pair_then_restated(home)
    (item,) = [i for i in json.loads(ok("review", "list", "--all", "--json"))
               if i["record_id"] == OLDER]  # fmt: skip
    assert item["decision"] == "keep"
    # a second person's dispute would stand as an answer too; an item memlife closed does not
    with SqliteStore(home / "memlife.db") as s:
        s.connection.execute("UPDATE review_items SET decision='answered_earlier', "
                             "reviewer='memlife:x' WHERE item_id=?", (item["item_id"],))  # fmt: skip
        s.connection.commit()
    policy = retention_now(home)
    night(2, policy)
    night(3, policy)
    (again,) = open_items()
    assert (again["record_id"], again["pair_id"]) == (OLDER, replacement)
