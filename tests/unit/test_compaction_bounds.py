"""Short-term compaction at its exact bounds (session 42, audit c; memlife.online.compaction and the
estimate it stands on). Each test holds one comparison or piece of boundary arithmetic a
mutant showed no existing test held; its docstring says what the adversary does, what
must hold and the mutant it kills. Real components only: the offline estimate counts,
the summariser is a plain object recording what it read (no network)."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from memlife.online.compaction import (
    Conversation,
    EstimateTokenCounter,
    Message,
    compact,
    validate_history,
)
from memlife.online.compaction_summary import so_far
from tests.support.messages import A, U

PLACEHOLDER = re.compile(
    r"\n\[\.\.\. ([\d,]+) of ([\d,]+) characters left out here for the summary \.\.\.\]\n"
)

EST = EstimateTokenCounter()


class Recording:
    """A summariser that answers ``reply`` and records what it read."""

    def __init__(self, reply: str = "S", max_tokens: object = 1024) -> None:
        self.reply = reply
        self.max_tokens = max_tokens
        self.calls: list[list[Message]] = []

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        self.calls.append(copy.deepcopy([dict(m) for m in messages]))
        return self.reply


def use(uid: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": uid, "name": "lookup", "input": args}


def result(uid: str, content: Any = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": uid, "content": content}


def text_turns(n: int, chars: int = 400) -> list[Message]:
    """``n`` plain text turns of two messages, ``chars`` characters each."""
    out: list[Message] = []
    for t in range(n):
        out += [U(f"{t}" + "u" * (chars - 1)), A(f"{t}" + "a" * (chars - 1))]
    return out


def agent_loop(rounds: int, tag: str = "t", size: int = 400) -> list[Message]:
    """One turn: a request, ``rounds`` tool rounds, an answer."""
    out: list[Message] = [U(f"task {tag}")]
    for r in range(rounds):
        out += [A([use(f"{tag}{r}", q=str(r))]), U([result(f"{tag}{r}", f"{r}" + "z" * size)])]
    return [*out, A(f"done {tag}")]


# ---- the whole-turn cut: allowance and fit at the budget ------------------------------------


def test_the_summary_allowance_is_exactly_an_eighth_of_the_budget() -> None:
    """Adversary: a budget set so that the newest three turns plus an eighth of the budget
    land exactly on it, then one token less. Must hold: at the budget three turns are kept
    (``count + budget // 8 <= budget``), one token less only two. Kills compaction.py
    ``budget_tokens // 8`` as ``// 7``, ``// 9`` or ``// 8 + 1``, and the cut's fit
    ``count(msgs[c:]) + allowance <= budget`` as ``<``."""
    history = text_turns(6)
    kept3 = EST.count(history[6:])
    budget = next(b for b in range(kept3, 2 * kept3) if b - b // 8 >= kept3)
    assert kept3 + budget // 8 == budget  # exactly on the budget (the data's own check)
    assert budget // 7 != budget // 8 != budget // 9

    got = compact(history, budget_tokens=budget, keep_last_turns=2, summarizer=Recording())
    assert got.reason == "compacted" and got.summarized_turns == 3
    assert got.messages[1:] == history[7:]

    less = compact(history, budget_tokens=budget - 1, keep_last_turns=2, summarizer=Recording())
    assert less.reason == "compacted" and less.summarized_turns == 4
    assert less.messages[1:] == history[9:]


def test_a_result_exactly_at_the_budget_is_not_over_budget() -> None:
    """Adversary: a budget equal to what the compacted history costs. Must hold: the result
    is ``compacted`` and its ``over_budget`` property is False (at the budget is within it).
    Kills compaction.py CompactionResult.over_budget ``tokens_after > budget_tokens`` as
    ``>=``."""
    history = text_turns(6)
    probe = compact(
        history, budget_tokens=700, keep_last_turns=2, summarizer=Recording(), summary_allowance=0
    )
    assert probe.tokens_after is not None
    got = compact(
        history,
        budget_tokens=probe.tokens_after,
        keep_last_turns=2,
        summarizer=Recording(),
        summary_allowance=0,
    )
    assert got.reason == "compacted" and got.tokens_after == got.budget_tokens
    assert got.over_budget is False
    one_less = compact(
        history,
        budget_tokens=probe.tokens_after - 1,
        keep_last_turns=2,
        summarizer=Recording(),
        summary_allowance=0,
    )
    assert one_less.compacted and one_less.tokens_after != probe.tokens_after


def test_a_whole_turn_cut_landing_exactly_on_the_budget_leaves_tool_rounds_alone() -> None:
    """Adversary: a history whose kept turns are tool loops with rounds to spare, and a
    budget equal to what the whole-turn cut leaves. Must hold: one summary, of whole turns
    only; every kept message verbatim, no tool round summarised. Kills compaction.py step 2
    ``if after > budget`` as ``>=`` (a second summary eats a kept turn's rounds though the
    history already fits)."""
    history = [*agent_loop(3, "a"), *agent_loop(3, "b"), *agent_loop(3, "c")]
    budget = EST.count(history) - 1  # the one whole-turn cut there is (keep 2 of 3) fits
    probe = compact(
        history,
        budget_tokens=budget,
        keep_last_turns=2,
        summarizer=Recording(),
        summary_allowance=0,
    )
    assert probe.reason == "compacted" and probe.summarized_rounds == 0
    assert probe.summarized_turns == 1 and probe.tokens_after is not None
    summarizer = Recording()
    got = compact(
        history,
        budget_tokens=probe.tokens_after,
        keep_last_turns=2,
        summarizer=summarizer,
        summary_allowance=0,
    )
    assert got.reason == "compacted" and got.tokens_after == probe.tokens_after
    assert got.summarized_rounds == 0 and len(summarizer.calls) == 1
    assert got.messages == probe.messages and got.messages[1:] == history[9:]


# ---- the tool-round cut at the budget -------------------------------------------------------


def test_a_round_cut_whose_kept_part_and_allowance_land_exactly_on_the_budget_is_taken() -> None:
    """Adversary: one agent loop (no whole turn to drop) and a budget equal to the request
    plus the rounds kept by one cut plus the summary allowance. Must hold: that cut is
    taken (the most rounds kept that fit), not the next one. Kills compaction.py round cut
    ``fits``: ``count(...) + allowance <= budget`` as ``<``."""
    history = agent_loop(6)  # round cuts before the assistant messages at 3, 5, 7, 9, 11, 13
    allowance = 60
    budget = EST.count([history[0], *history[7:]]) + allowance
    got = compact(
        history,
        budget_tokens=budget,
        keep_last_turns=1,
        summarizer=Recording(),
        summary_allowance=allowance,
    )
    assert got.reason == "compacted" and got.summarized_rounds == 3
    assert got.messages[1:] == history[7:]
    assert validate_history(got.messages, allow_pending_tool_use=True) == []


# ---- explicit turn starts after a cut ------------------------------------------------------


def test_explicit_turn_starts_follow_a_round_cut() -> None:
    """Adversary: explicit turn starts over a short turn and an agent loop, a budget only
    a round cut meets. Must hold: the returned turn starts name the same turns in the
    shorter history (the loop's request where it now is)."""
    history = [U("hi"), A("hello"), *agent_loop(6)]
    conv = Conversation(history, [0, 2])
    budget = EST.count([*history[:3], *history[9:]]) + 60
    got = compact(
        conv,
        budget_tokens=budget,
        keep_last_turns=2,
        summarizer=Recording(),
        summary_allowance=60,
    )
    assert got.reason == "compacted" and got.summarized_rounds == 3
    assert got.conversation.turn_starts == [0, 2]
    assert got.messages[:2] == history[:2] and got.messages[3:] == history[9:]


def test_the_round_cut_goes_to_the_turn_whose_summarisable_rounds_cost_most() -> None:
    """Adversary: two kept tool loops; in the first, the round a cut may take first is
    small and the huge file read comes second; in the other the first round is medium.
    Must hold: the turn is chosen by all the rounds a cut may take (up to the last round
    cut), so the huge read is summarised and the history fits. Kills compaction.py
    ``est.count(cur[task + 1 : cuts[-1]])`` as ``cuts[0]`` (the medium turn is cut, no
    gain)."""
    huge = [
        U("task h"),
        A([use("h0", q="0")]),
        U([result("h0", "small")]),
        A([use("h1", q="1")]),
        U([result("h1", "x" * 8000)]),
        A([use("h2", q="2")]),
        U([result("h2", "small")]),
        A("done h"),
    ]
    medium = [
        U("task m"),
        A([use("m0", q="0")]),
        U([result("m0", "y" * 800)]),
        A([use("m1", q="1")]),
        U([result("m1", "small")]),
        A("done m"),
    ]
    history = [*huge, *medium]
    summarizer = Recording()
    got = compact(history, budget_tokens=1000, keep_last_turns=2, summarizer=summarizer)
    assert got.reason == "compacted" and got.summarized_rounds == 2
    assert summarizer.calls == [huge[:5]]
    assert got.messages[1:] == [*huge[5:], *medium]


# ---- an oversize tool result, shortened for the summariser ---------------------------------


def test_the_placeholder_says_exactly_how_many_characters_were_left_out() -> None:
    """Adversary: a tool result over the summariser's bound (so the summariser reads it
    shortened), under several bounds. Must hold: the head and tail the summariser reads
    plus the characters the placeholder says were left out are the whole text, and they
    are its real head and tail. Kills compaction_summary.py ``_cut`` ``head = keep - keep
    // 2`` as ``keep // 2`` (an odd share loses a character the placeholder does not
    count)."""
    text = "".join(chr(0x4E00 + i % 500) for i in range(30_000))  # unicode-heavy, 30k chars
    history = [U("read it"), A([use("t1")]), U([result("t1", text)]), A("read"), U("next?")]
    for bound in range(1500, 1510):
        summarizer = Recording()
        got = compact(
            history,
            budget_tokens=100,
            keep_last_turns=1,
            summarizer=summarizer,
            summarizer_input_tokens=bound,
        )
        assert got.compacted, got.error
        (block,) = summarizer.calls[0][2]["content"]
        seen = block["content"]
        match = PLACEHOLDER.search(seen)
        assert match is not None
        left_out, total = (int(g.replace(",", "")) for g in match.groups())
        head, tail = seen[: match.start()], seen[match.end() :]
        assert total == len(text) and len(head) + len(tail) + left_out == len(text)
        assert text.startswith(head) and text.endswith(tail)


# ---- the summariser's bound, met exactly ---------------------------------------------------


def test_a_unit_exactly_at_the_summarisers_bound_is_read_whole() -> None:
    """Adversary: a first message costing exactly ``summarizer_input_tokens``. Must hold:
    it fits the bound, so the summariser reads it whole, alone, not shortened. Kills
    compaction_summary.py summarise_in_chunks ``if cost > bound`` as ``>=``."""
    history = [U("q" * 4000), A("ok"), U("next?")]
    bound = EST.count(history[:1])
    summarizer = Recording()
    got = compact(
        history,
        budget_tokens=100,
        keep_last_turns=1,
        summarizer=summarizer,
        summarizer_input_tokens=bound,
    )
    assert got.compacted, got.error
    assert summarizer.calls[0] == history[:1]


def test_a_summary_so_far_that_leaves_exactly_room_for_the_next_unit_is_not_condensed() -> None:
    """Adversary: a summariser whose summary, read again with the next unit, lands exactly
    on ``summarizer_input_tokens``. Must hold: two calls, the second the summary so far and
    that unit (nothing condensed). Kills compaction_summary.py ``held + costs[i] > bound``
    as ``>=`` (a third call condenses a summary that fits)."""
    history = [U("q" * 4000), A("a" * 400), U("next?")]
    reply = "s" * 200
    bound = EST.count(history[:1])
    held = EST.count([so_far(reply)])
    history[1] = A("a" * (4 * (bound - held - 4)))
    assert held + EST.count(history[1:2]) == bound
    summarizer = Recording(reply)
    got = compact(
        history,
        budget_tokens=100,
        keep_last_turns=1,
        summarizer=summarizer,
        summarizer_input_tokens=bound,
    )
    assert got.compacted, got.error
    assert summarizer.calls == [history[:1], [so_far(reply), history[1]]]
