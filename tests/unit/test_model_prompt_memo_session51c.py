"""A new consolidation prompt re-opens what the old one's answers settled (audit 51c).

``prompts.PROMPT_VERSION`` says "bump on any wording change: results depend on it", yet
nothing read it. The consolidation memo keys a group's outcome by its members, the policy
and the consolidator ("anthropic:<model>"), not by the prompt: a group the model judged
complement (KEPT_APART, "settled until a member changes") under one prompt was never asked
again under the next one. It happened once already: consolidate.v4 (session 25) told the
model what a merge must keep, and every group a v3 answer had kept apart stayed apart for
good. A kept dry-run answer already misses on a new prompt (its digest covers the system
prompt); the memo must too.

The real anthropic SDK against the local Messages API server and the real pipeline on the
embedded SQLite store; the upgrade is the prompt's wording and version changed between
two nights.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from memlife.consolidate import prompts
from tests.fakes.messages_api import MessagesServer
from tests.unit.test_consolidation_adversarial import (
    COFFEE,
    NIGHT,
    _answer,
    _run,
    _seed,
    rec,
    run_env,  # noqa: F401 - the pipeline tests' fixture
)

NEWER = "I drink black coffee every morning, with oat milk."


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


def _kept_apart_once(home: Path, server: MessagesServer) -> None:
    """Night 1: the model keeps the pair apart; night 2: the memo settles it, no call."""
    _seed(home, [rec("b-1", COFFEE, 1), rec("b-2", NEWER, 6)])
    server.set_handler(lambda body: _answer(COFFEE, ["b-1", "b-2"], relation="complement"))
    receipt = _run(NIGHT)
    assert receipt["other_counts"]["consolidation_kept_apart"] == 1
    assert len(server.message_requests) == 1
    receipt = _run(NIGHT + timedelta(days=1))
    assert receipt["other_counts"]["consolidation_unchanged"] == 1
    assert len(server.message_requests) == 1


def test_a_new_prompt_asks_again_what_the_old_one_kept_apart(
    run_env: Path,  # noqa: F811
    messages_server: MessagesServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _kept_apart_once(run_env, messages_server)
    # memlife upgraded: the prompt's wording changed and its version was bumped
    monkeypatch.setattr(prompts, "PROMPT_VERSION", "consolidate.v5")
    monkeypatch.setattr(prompts, "SYSTEM_PROMPT", prompts.SYSTEM_PROMPT + "\n8. Be brief.")
    receipt = _run(NIGHT + timedelta(days=2))
    assert len(messages_server.message_requests) == 2  # asked under the new prompt
    assert receipt["other_counts"]["consolidation_kept_apart"] == 1


def test_the_same_prompt_keeps_the_outcome_settled(
    run_env: Path,  # noqa: F811
    messages_server: MessagesServer,
) -> None:
    """Control: with the prompt unchanged the group stays settled (no call), as before."""
    _kept_apart_once(run_env, messages_server)
    receipt = _run(NIGHT + timedelta(days=2))
    assert receipt["other_counts"]["consolidation_unchanged"] == 1
    assert len(messages_server.message_requests) == 1
