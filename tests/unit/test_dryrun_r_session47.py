"""Session 47 (audit 47r): a dry run's extractive stand-in for the model (audit 47q: `judge_additive`
off, it plans as the model would) against the stage cache a plain dry run left. Real
SQLite store, the local engine, the real CLI through its typer runner, the fake Messages
API (no call is made: a dry run without --with-model estimates)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlife.would_change import would_change
from tests.fakes.messages_api import MessagesServer
from tests.unit.test_counts_session47 import ROLLOUT, night, rec, seed
from tests.unit.test_locomo_model_nights_session47 import with_model


def test_a_dry_run_with_a_model_key_does_not_replay_the_offline_dry_runs_keep_apart(
    home: Path, monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer
) -> None:
    """The operator dry-runs the night before any model key is set ("drinks coffee", then
    "also drinks green tea": offline, the extractive rule keeps them apart, and the stage
    cache keeps that outcome). A key is then configured and the night dry-run again, to
    see what the apply run will send to the model. Must hold: the dry run says what a dry
    run on a fresh home says: one group for the model (one estimated call, `consolidate
    (groups)` 1); it replayed the offline `kept apart` (0 calls, 0 groups)."""
    seed(home, [rec("c", ROLLOUT, "The user drinks coffee.", age=30, subject="drinks"),
                rec("d", ROLLOUT, "The user also drinks green tea.", age=10, subject="drinks")])  # fmt: skip
    offline = night("--dry-run")
    assert offline["other_counts"]["consolidation_kept_apart"] == 1
    with_model(monkeypatch, messages_server)
    dry = night("--dry-run")
    assert messages_server.message_requests == []
    assert dry["model"]["estimated_calls"] == 1, dry["model"]
    assert dict(would_change(dry))["consolidate (groups)"] == 1
