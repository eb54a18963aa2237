"""Short-term compaction, session 27 (edges): the summariser never reads more than
``summarizer_input_tokens``, not even for one message or tool call larger than that by
itself (it is shortened for the summariser only: head and tail of each long text, a
placeholder saying how much was left out, tool ids and pairing as they were), and a
token counter's answer is used only when it is a whole number of tokens (an int, not a
bool, at least 0; a float, even 100.0, is refused).

Before, such a unit went to the summariser whole (a 250k-token file read could never be
compacted with a summariser of a 200k window: ``summarizer_failed`` on every call), and a
negative or string count was taken (``under_budget`` at -2460 tokens, ``compacted`` at
-1,000,000)."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlife.online.compaction import (
    Conversation,
    EstimateTokenCounter,
    Message,
    compact,
    validate_history,
)
from memlife.online.compaction_summary import is_own_summary
from tests.support.messages import A, U

EST = EstimateTokenCounter()
LEFT_OUT = "characters left out"


def _use(uid: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": uid, "name": "read_file", "input": args}


def _result(uid: str, content: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": uid, "content": content}


def _image() -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iV"}}


class Windowed:
    """A summariser with a context window: refuses an input over ``window`` estimated
    tokens (as the model would: "prompt is too long"); records every input."""

    max_tokens = 1024

    def __init__(self, window: int = 10**12, reply: Callable[[list[Message]], str] | None = None):
        self.window = window
        self.reply = reply or (lambda call: f"summary of {len(call)} messages")
        self.calls: list[list[Message]] = []

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        call = copy.deepcopy([dict(m) for m in messages])
        self.calls.append(call)
        size = EST.count(call)
        if size > self.window:
            raise RuntimeError(f"400 prompt is too long: {size} tokens > {self.window}")
        return self.reply(call)

    def sizes(self) -> list[int]:
        return [EST.count(c) for c in self.calls]


def _file_read_history(chars: int = 1_000_000) -> list[Message]:
    """The oldest turn reads one huge file (~chars/4 estimated tokens); six short turns
    follow."""
    msgs = [
        U("Read the log file and tell me what failed."),
        A([_use("t1", path="/var/log/app.log")]),
        U([_result("t1", "HEAD-OF-LOG " + "x" * chars + " TAIL-OF-LOG")]),
        A("The job failed at step 3."),
    ]
    for i in range(6):
        msgs += [U(f"question {i}"), A(f"answer {i}")]
    return msgs


def _stripped(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """``messages`` without the summary blocks compaction wrote (a message left empty by
    that, the summary's own message, goes)."""
    out: list[Message] = []
    for msg in messages:
        content = msg["content"]
        if isinstance(content, list):
            blocks = [b for b in content if not is_own_summary(b)]
            if not blocks:
                continue
            if len(blocks) != len(content):
                msg = {**msg, "content": blocks}
        out.append(dict(msg))
    return out


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    """Content as blocks: the summary goes in front of a kept string as a block of its own
    (the string then its own text block, as the API reads it)."""
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _is_subsequence(part: Sequence[Message], whole: Sequence[Message]) -> bool:
    it = iter(whole)
    return all(any(x == y or _blocks(x) == _blocks(y) for y in it) for x in part)


def _check_kept(result: Any, history: list[Message]) -> None:
    """The part compaction kept is the input's, unaltered (only the summary is new)."""
    assert validate_history(result.messages, allow_pending_tool_use=True) == []
    kept = _stripped(result.messages)
    assert _is_subsequence(kept, history), "a kept message was altered"
    assert _blocks(kept[-1]) == _blocks(history[-1])


# ---- 1. an oversize unit is shortened for the summariser, never read over the bound -------


def test_a_huge_file_read_is_compacted_with_a_windowed_summariser() -> None:
    """The reproduction: 250k estimated tokens, budget 200k, a summariser with a 200k
    window. Before: every call failed (the tool call with its result went whole)."""
    history = _file_read_history()
    assert EST.count(history) > 250_000
    summarizer = Windowed(window=200_000)
    result = compact(copy.deepcopy(history), budget_tokens=200_000, summarizer=summarizer)
    assert result.compacted and result.reason == "compacted", result.error
    assert max(summarizer.sizes()) <= 100_000, summarizer.sizes()
    _check_kept(result, history)


@pytest.mark.parametrize("bound", [20_000, 3_000, 200])
def test_a_lower_bound_is_honoured_for_the_oversize_unit(bound: int) -> None:
    history = _file_read_history()
    summarizer = Windowed()
    result = compact(
        copy.deepcopy(history), budget_tokens=50_000, summarizer=summarizer,
        summarizer_input_tokens=bound,
    )  # fmt: skip
    assert result.compacted, result.error
    assert summarizer.calls and max(summarizer.sizes()) <= bound, summarizer.sizes()
    for call in summarizer.calls:
        assert validate_history(call) == [], validate_history(call)
    _check_kept(result, history)


def test_the_shortened_tool_result_keeps_ids_head_tail_and_says_what_was_left_out() -> None:
    history = _file_read_history()
    summarizer = Windowed()
    result = compact(
        copy.deepcopy(history), budget_tokens=50_000, summarizer=summarizer,
        summarizer_input_tokens=20_000,
    )  # fmt: skip
    assert result.compacted, result.error
    reads = [m for call in summarizer.calls for m in call]
    use = next(m for m in reads if m["role"] == "assistant" and isinstance(m["content"], list))
    assert use == history[1]  # the call itself was small: as it was
    answer = reads[reads.index(use) + 1]
    (block,) = answer["content"]
    assert block["type"] == "tool_result" and block["tool_use_id"] == "t1"
    text = block["content"]
    assert text.startswith("HEAD-OF-LOG ") and text.endswith(" TAIL-OF-LOG")
    assert LEFT_OUT in text and len(text) < 80_000
    left_out = int(text.split("[... ")[1].split(" of ")[0].replace(",", ""))
    assert left_out > 900_000 and f"of {len(history[2]['content'][0]['content']):,} " in text
    assert history[2]["content"][0]["content"].endswith(" TAIL-OF-LOG")  # input untouched


def test_an_oversize_first_message_and_tool_input_are_shortened() -> None:
    """A long pasted request, and a tool call whose input is huge: each stays a valid
    message of its kind (the input still a JSON object with its keys)."""
    history = [
        U("PASTE " + "p" * 400_000 + " END"),
        A([_use("w1", path="out.txt", text="W" * 300_000)]),
        U([_result("w1", "written")]),
        A("Saved."),
        U("thanks"),
        A("welcome"),
        U("and now?"),
        A("done"),
    ]
    summarizer = Windowed()
    result = compact(
        copy.deepcopy(history), budget_tokens=2_000, keep_last_turns=1,
        summarizer=summarizer, summarizer_input_tokens=10_000,
    )  # fmt: skip
    assert result.compacted, result.error
    assert max(summarizer.sizes()) <= 10_000
    reads = [m for call in summarizer.calls for m in call]
    first = reads[0]["content"]
    text = first if isinstance(first, str) else first[0]["text"]
    assert text.startswith("PASTE ") and text.endswith(" END") and LEFT_OUT in text
    use = next(m for m in reads if m["role"] == "assistant")["content"][0]
    assert use["id"] == "w1" and set(use["input"]) == {"path", "text"}
    assert use["input"]["path"] == "out.txt" and LEFT_OUT in use["input"]["text"]
    _check_kept(result, history)


def test_images_and_many_parallel_calls_fit_too() -> None:
    """A tool result of 150 images (240k estimated tokens) and a round of 3,000 parallel
    calls: no long text to cut, yet each is read within the bound."""
    images = [_image() for _ in range(150)]
    calls = [f"c{i}" for i in range(3000)]
    history = [
        U("screenshot every page"),
        A([_use("s1")]),
        U([_result("s1", images)]),
        A([_use(c, n=i) for i, c in enumerate(calls)]),
        U([_result(c, f"page {i} ok") for i, c in enumerate(calls)]),
        A("All pages captured."),
        U("thanks"),
        A("welcome"),
    ]
    assert EST.count(history[3:5]) > 20_000
    summarizer = Windowed()
    result = compact(
        copy.deepcopy(history), budget_tokens=2_000, keep_last_turns=1,
        summarizer=summarizer, summarizer_input_tokens=20_000,
    )  # fmt: skip
    assert result.compacted, result.error
    assert max(summarizer.sizes()) <= 20_000, summarizer.sizes()
    for call in summarizer.calls:
        assert validate_history(call) == [], validate_history(call)
    _check_kept(result, history)


def test_a_bound_too_small_for_any_shortened_unit_fails_unchanged() -> None:
    history = _file_read_history(100_000)
    conv = Conversation(copy.deepcopy(history))
    summarizer = Windowed()
    result = compact(
        conv, budget_tokens=1_000, summarizer=summarizer, summarizer_input_tokens=10
    )  # fmt: skip
    assert not result.compacted and result.reason == "summarizer_failed"
    assert result.error and "summarizer_input_tokens=10" in result.error
    assert result.conversation is conv and conv.messages == history
    assert all(size <= 10 for size in summarizer.sizes())


# ---- the property -------------------------------------------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Valid histories of text turns and tool loops, where any text, tool result or tool
    input may be far larger than the bound; images in tool results now and then."""
    ids = itertools.count()
    size = st.one_of(st.integers(1, 400), st.integers(1, 60_000))
    n_turns = draw(st.integers(2, 5))
    msgs: list[Message] = []
    for t in range(n_turns):
        last = t == n_turns - 1
        msgs.append(U([{"type": "text", "text": f"ask {t} " + "q" * draw(size)}]))
        rounds = draw(st.integers(0, 3))
        pending = False
        for r in range(rounds):
            use_ids = [f"toolu_{next(ids)}" for _ in range(draw(st.integers(1, 3)))]
            blocks: list[dict[str, Any]] = []
            if draw(st.booleans()):
                blocks.append({"type": "text", "text": "checking " + "a" * draw(size)})
            blocks += [_use(u, arg="i" * draw(st.integers(0, 30_000))) for u in use_ids]
            msgs.append(A(blocks))
            if last and r == rounds - 1 and draw(st.booleans()):
                pending = True
                break
            results = []
            for u in use_ids:
                body: Any = "r" * draw(size)
                if draw(st.integers(0, 4)) == 0:
                    body = [{"type": "text", "text": body}, *[_image()] * draw(st.integers(0, 9))]
                results.append(_result(u, body))
            msgs.append(U(results))
        if not pending:
            msgs.append(A(f"answer {t} " + "y" * draw(size)))
    return msgs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=histories(),
    budget=st.integers(0, 20_000),
    keep=st.integers(1, 2),
    bound=st.integers(200, 12_000),
    data=st.data(),
)
def test_no_summariser_input_overruns_the_bound_even_for_oversize_units(
    history: list[Message], budget: int, keep: int, bound: int, data: st.DataObject
) -> None:
    """For any such history: every summariser input is a valid history within the bound
    (tool pairing intact), the result is valid, and what it kept is the input's, unaltered;
    unchanged when not compacted."""
    assert validate_history(history, allow_pending_tool_use=True) == []
    conv = Conversation(copy.deepcopy(history))
    chars = st.one_of(st.integers(1, 40), st.integers(1, 2 * bound))
    summarizer = Windowed(reply=lambda call: "s" * data.draw(chars, label="summary chars"))
    result = compact(
        conv, budget_tokens=budget, keep_last_turns=keep, summarizer=summarizer,
        summarizer_input_tokens=bound,
    )  # fmt: skip
    for call in summarizer.calls:
        assert validate_history(call) == [], validate_history(call)
        assert EST.count(call) <= bound, (EST.count(call), bound)
    if result.compacted:
        _check_kept(result, history)
    else:
        assert result.conversation is conv and conv.messages == history


# ---- 2. a counter's answer is used only when it is a whole number of tokens ---------------


def _turns() -> list[Message]:
    return [m for i in range(6) for m in (U(f"q{i} " + "w " * 400), A(f"a{i} " + "w " * 400))]


class Counter:
    def __init__(self, answer: Callable[[Sequence[Mapping[str, Any]]], object]) -> None:
        self.answer = answer

    def count(self, messages: Sequence[Mapping[str, Any]]) -> Any:
        return self.answer(messages)


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (lambda m: -EST.count(m), "int"),
        (lambda m: -1, "int"),
        (lambda m: "100000", "str"),
        (lambda m: 0.9 * len(m), "float"),
        (lambda m: float(EST.count(m)), "float"),
        (lambda m: True, "bool"),
        (lambda m: [EST.count(m)], "list"),
        (lambda m: float("nan"), "float"),
        (lambda m: None, "NoneType"),
    ],
    ids=[
        "negative",
        "minus-one",
        "str",
        "fraction",
        "integral-float",
        "bool",
        "list",
        "nan",
        "none",
    ],  # fmt: skip
)
def test_a_count_that_is_not_a_whole_number_is_counter_failed(answer: Any, kind: str) -> None:
    history = _turns()
    summarizer = Windowed()
    result = compact(
        copy.deepcopy(history), budget_tokens=500, counter=Counter(answer), summarizer=summarizer
    )
    assert (result.reason, result.compacted) == ("counter_failed", False)
    assert result.tokens_before is None and result.messages == history
    assert result.error and f"a {kind}" in result.error and "whole number" in result.error
    assert not summarizer.calls


def test_a_bad_count_of_a_part_is_counter_failed_too() -> None:
    """The whole history counted right, its parts (the kept turns) negative: before, the
    kept part "fitted" anything and compaction reported tokens_after=-1000000."""
    history = _turns()
    counter = Counter(lambda m: EST.count(m) if len(m) == len(history) else -(10**6))
    result = compact(copy.deepcopy(history), budget_tokens=500, counter=counter,
                     summarizer=Windowed())  # fmt: skip
    assert (result.reason, result.compacted) == ("counter_failed", False)
    assert result.tokens_before == EST.count(history) and result.messages == history
    assert result.error and "-1000000" in result.error


def test_integer_types_other_than_int_are_accepted() -> None:
    """numpy integers (``__index__``) are whole numbers; zero is a count too."""
    np = pytest.importorskip("numpy")
    history = _turns()
    result = compact(
        copy.deepcopy(history), budget_tokens=500,
        counter=Counter(lambda m: np.int64(EST.count(m))), summarizer=Windowed(),
    )  # fmt: skip
    assert result.compacted and isinstance(result.tokens_before, int)
    assert type(result.tokens_after) is int
    zero = compact(copy.deepcopy(history), budget_tokens=0, counter=Counter(lambda m: 0))
    assert zero.reason == "under_budget" and zero.tokens_before == 0
