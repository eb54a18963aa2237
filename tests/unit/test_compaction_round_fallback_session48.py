"""Short-term compaction, session 48 (audit 48c): a cut between tool rounds whose summary overruns its
allowance. Whole-turn cuts are tried once more at the farthest cut in that case; round
cuts must be too, or the call reports ``over_budget`` although keeping fewer rounds fits,
and the next call summarises the summary again. Real components: the offline estimate,
a plain summariser object (no network)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memlife.online.compaction import Message, compact, validate_history
from tests.support.messages import A, U

SUMMARY = "Read f0 to f6: " + "nothing notable; " * 12  # ~57 tokens: over its allowance


class Fixed:
    """A summariser answering the same summary, longer than its ``max_tokens`` says."""

    def __init__(self) -> None:
        self.max_tokens = 20
        self.calls = 0

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        self.calls += 1
        return SUMMARY


def _agent_loop(rounds: int) -> list[Message]:
    """One request, then ``rounds`` tool rounds (one turn)."""
    msgs = [U("Read every file and report.")]
    for r in range(rounds):
        use = {"type": "tool_use", "id": f"t{r}", "name": "read", "input": {"path": f"f{r}"}}
        res = {"type": "tool_result", "tool_use_id": f"t{r}", "content": "x" * 400}
        msgs += [A([use]), U([res])]
    return msgs


def test_a_round_summary_over_its_allowance_is_retried_at_the_farthest_round_cut() -> None:
    """Adversary: an agent loop of eight tool rounds (915 estimated tokens, budget 300,
    keep one round) and a summariser whose summary runs past the allowance its
    ``max_tokens`` gives. Must hold: as for whole turns, the round cut is tried again at
    the farthest cut, where it fits (196 tokens), so the call reports ``compacted``, not
    ``over_budget`` at 309; and compacting that result again under the same budget is a
    no-op, not a second summary of the summary."""
    first = compact(_agent_loop(8), budget_tokens=300, keep_last_turns=1, summarizer=Fixed())
    assert first.compacted and not validate_history(first.messages, allow_pending_tool_use=True)
    assert (first.reason, first.tokens_after) == ("compacted", 196), first
    again = Fixed()
    second = compact(first.messages, budget_tokens=300, keep_last_turns=1, summarizer=again)
    assert (second.reason, again.calls) == ("under_budget", 0)
