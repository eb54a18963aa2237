"""Audit 50m (session 50): mutation pass over audit 50b's failed-shard names.

Kills a mutant of ``Shard.__str__`` the session's tests let live (named below).
"""

from __future__ import annotations

import json

from memlife.run_types import Shard


def test_a_quoted_actor_is_shown_as_written_not_as_escapes() -> None:
    """An actor holding ':' and a non-ASCII letter ("é:a", as AgentCore allows) is quoted
    so that the shard's name reads as one shard; it must still read as the actor's own
    letters (people compare it with the console). Kills the mutant that dropped
    ``ensure_ascii=False`` (it showed ``"\\u00e9:a":/x``)."""
    name = str(Shard("é:a", "/x"))
    assert name == '"é:a":/x'
    actor, _, namespace = name.rpartition(":")
    assert json.loads(actor) == "é:a" and namespace == "/x"


def test_control_an_actor_opening_with_a_quote_is_quoted() -> None:
    """Control: '"q' is quoted, so no plain actor's name can read as a quoted one."""
    assert str(Shard('"q', "/x")) == '"\\"q":/x'
    assert str(Shard("a", "/x:/y")) == "a:/x:/y"
