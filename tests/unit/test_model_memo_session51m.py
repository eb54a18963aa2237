"""Audit 51m (session 51 mutation pass): the prompt's version in the consolidation memo
(audit 51c) as a dry run reads it.

A dry run keys the memo as the apply run would (``memo_as`` =
``pipeline.applied_consolidator_id()``) so that its estimate skips the groups an apply
night settled. The session's tests run apply nights only, so two mutants lived: the
dry-run id without the prompt's version, and the prompt's version added on top of
``memo_as``. Under the first, the dry run after a settled night missed the memo: it
estimated a model call (and its tokens) for a group no apply night will send; under the
second, ``--dry-run --with-model`` sent that group to the model again (a paid call).

Real anthropic SDK against the local Messages API server, the real pipeline on SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from memlife.pipeline import RunConfig, run_local
from tests.fakes.messages_api import MessagesServer
from tests.unit.test_consolidation_adversarial import (
    NIGHT,
    run_env,  # noqa: F401 - the pipeline tests' fixture
)
from tests.unit.test_model_prompt_memo_session51c import _kept_apart_once


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


def test_a_dry_run_after_a_settled_night_estimates_no_call_for_it(
    run_env: Path,  # noqa: F811
    messages_server: MessagesServer,
) -> None:
    _kept_apart_once(run_env, messages_server)
    dry = run_local(RunConfig(dry_run=True, now=NIGHT + timedelta(days=2)))
    assert dry.other.get("consolidation_unchanged") == 1, dry.other
    assert not dry.other.get("estimated_model_calls"), dry.other
    assert len(messages_server.message_requests) == 1


def test_a_dry_run_with_the_model_after_a_settled_night_sends_nothing(
    run_env: Path,  # noqa: F811
    messages_server: MessagesServer,
) -> None:
    """``--dry-run --with-model`` runs the apply night's consolidator under ``memo_as``:
    the key must be the apply night's, the prompt's version once, so the settled group is
    not sent (a paid call the apply night would not make)."""
    _kept_apart_once(run_env, messages_server)
    dry = run_local(RunConfig(dry_run=True, with_model=True, now=NIGHT + timedelta(days=2)))
    assert dry.other.get("consolidation_unchanged") == 1, dry.other
    assert len(messages_server.message_requests) == 1
