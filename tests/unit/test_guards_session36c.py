"""Session 36c mutation audit of the online library's short-term side: compaction
(:mod:`memlife.online.compaction`), its summaries (:mod:`memlife.online.compaction_summary`),
the history checks and estimates it stands on (:mod:`memlife.online.history`) and the
online argument checks (:mod:`memlife.online.inputs`). Each test holds one guard a mutant
showed untested (its docstring names the guard and the mutant); one test holds a real
under-count found on the way (an image inside a content document, now fixed). Only public functions; the summariser is a
plain object or the real Anthropic SDK against the local fake Messages API
(tests.fakes.messages_api), the store a real SQLite file: no mocks of memlife logic."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlife import Memory
from memlife.errors import InputError
from memlife.online.compaction import (
    SUMMARY_HEADER,
    AnthropicSummarizer,
    AnthropicTokenCounter,
    EstimateTokenCounter,
    Message,
    compact,
    render_transcript,
    validate_history,
)
from memlife.online.history import PDF_PAGE_TOKENS
from memlife.online.inputs import stored_time
from memlife.online.memory import LongTermMemory
from tests.fakes.messages_api import MessagesServer, text_reply
from tests.support.messages import A, U

EST = EstimateTokenCounter()


def use(uid: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": uid, "name": "lookup", "input": args}


def result(uid: str, content: Any = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": uid, "content": content}


class Recording:
    """A summariser that answers ``reply`` and records what it read."""

    def __init__(self, reply: str = "S", max_tokens: object = 1024) -> None:
        self.reply = reply
        self.max_tokens = max_tokens
        self.calls: list[list[Message]] = []

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        self.calls.append(copy.deepcopy([dict(m) for m in messages]))
        return self.reply


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


def _dump(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False)


def text_turns(n: int, chars: int = 396) -> list[Message]:
    """``n`` text turns; each message costs 4 + chars/4 estimated tokens (104 by default)."""
    out: list[Message] = []
    for t in range(n):
        out += [U(f"{t}" + "u" * (chars - 1)), A(f"{t}" + "a" * (chars - 1))]
    return out


# ---- compaction: the summary allowance -----------------------------------------------------


def test_a_bool_max_tokens_on_the_summariser_is_not_taken_as_its_reply_size() -> None:
    """Guard: compaction.py ``reply if isinstance(reply, int) and not isinstance(reply,
    bool) else 1024`` (the default summary allowance). Mutant: the bool test dropped, so
    ``max_tokens=True`` leaves a one-token allowance and a cut whose kept part fits only
    without room for the summary is taken (3 turns summarised instead of 4)."""
    history = text_turns(6)  # 208 tokens a turn
    budget = 650  # allowance min(1024, 650 // 8) = 81: 3 turns (624) + 81 > 650
    got = compact(
        history, budget_tokens=budget, keep_last_turns=2, summarizer=Recording(max_tokens=True)
    )
    assert got.compacted and got.reason == "compacted"
    assert got.summarized_turns == 4
    assert got.messages[1:] == history[9:]


# ---- validate_history: each problem named by message index --------------------------------


INVALID: dict[str, tuple[list[Message], str]] = {
    "duplicate id": (
        [U("q"), A([use("t1")]), U([result("t1")]), A([use("t1")]), U([result("t1")])],
        "message 3: duplicate tool_use id t1",
    ),
    "tool_use in a user message": (
        [U([{"type": "text", "text": "q"}, use("t1")]), A("a")],
        "message 0: tool_use blocks only belong in assistant messages",
    ),
    "tool_result in an assistant message": (
        [U("q"), A([use("t1")]), U([result("t1")]), A([result("t1")])],
        "message 3: tool_result blocks only belong in user messages",
    ),
    "empty block list": ([U("q"), A([])], "message 1: content is empty"),
    "blank string": ([U("q"), A(" \n\t ")], "message 1: content is empty"),
    "answered twice": (
        [U("q"), A([use("t1")]), U([result("t1"), result("t1")])],
        "message 2: a tool_use is answered twice",
    ),
}


@pytest.mark.parametrize("case", list(INVALID), ids=list(INVALID))
def test_validate_history_names_the_message_of_each_problem(case: str) -> None:
    """Guards: history.py validate_history's duplicate-id check (``if use_id in
    seen_use_ids``), role checks of tool blocks (``uses and role != "assistant"``,
    ``role != "user"`` for results), the empty-content check (``not content or`` blank
    string) and the answered-twice check. Mutants: each check dropped (or ``not content``
    narrowed to strings only); the history then passes, or passes without its named
    problem. compact reports it as invalid_input, the input untouched, no summariser call."""
    messages, problem = INVALID[case]
    assert problem in validate_history(messages, allow_pending_tool_use=True)
    summarizer = Recording()
    got = compact(copy.deepcopy(messages), budget_tokens=0, summarizer=summarizer)
    assert got.reason == "invalid_input" and not got.compacted
    assert problem in got.problems
    assert got.messages == messages and summarizer.calls == []


# ---- compaction: the whole-turn cut -------------------------------------------------------


def test_a_summary_over_its_allowance_falls_back_to_the_farthest_cut() -> None:
    """Guard: compaction.py ``for cut in dict.fromkeys((fit, cands[-1]))``: when the summary
    overruns its allowance at the fitting cut, the farthest cut is tried. Mutant: only the
    fitting cut (``(fit,)``); the result stays over budget though a fitting one exists."""
    history = text_turns(6)  # 208 tokens a turn; kept from turn 3: 624, from turn 4: 416
    summarizer = Recording("word " * 160)  # ~200 tokens, over the allowance of 720 // 8 = 90
    got = compact(history, budget_tokens=720, keep_last_turns=2, summarizer=summarizer)
    assert got.reason == "compacted" and got.tokens_after is not None
    assert got.tokens_after <= 720
    assert got.summarized_turns == 4 and got.messages[1:] == history[9:]
    assert len(summarizer.calls) == 2  # the fitting cut first, then the farthest
    assert summarizer.calls[0] == history[:6] and summarizer.calls[1] == history[:8]


def test_a_history_exactly_at_the_budget_after_the_first_cut_is_not_cut_further() -> None:
    """Guards: compaction.py ``if after <= budget: break`` (a summary that lands exactly on
    the budget fits) and the reason ``"compacted" if after <= budget``. Mutants: ``after <
    budget`` in either; a second summary of one more turn is written and that turn is lost
    from the verbatim history for nothing, or a history exactly at budget is reported
    over_budget."""
    history = text_turns(6)
    probe = compact(
        history, budget_tokens=700, keep_last_turns=2, summarizer=Recording(), summary_allowance=0
    )
    assert probe.summarized_turns == 3 and probe.tokens_after is not None
    exact = probe.tokens_after  # the kept three turns plus the summary
    summarizer = Recording()
    got = compact(
        history, budget_tokens=exact, keep_last_turns=2, summarizer=summarizer, summary_allowance=0
    )
    assert got.reason == "compacted" and got.tokens_after == exact
    assert got.summarized_turns == 3 and len(summarizer.calls) == 1
    assert got.messages == probe.messages


# ---- compaction: tool rounds ----------------------------------------------------------------


def _loop(tag: str, first_result: str) -> list[Message]:
    """One turn of two tool rounds and an answer."""
    return [
        U(f"question {tag}"),
        A([use(f"{tag}1", q="a")]),
        U([result(f"{tag}1", first_result)]),
        A([use(f"{tag}2", q="b")]),
        U([result(f"{tag}2", "r")]),
        A(f"answer {tag}"),
    ]


def test_tool_rounds_are_summarised_in_the_turn_where_they_cost_most() -> None:
    """Guard: compaction.py ``max(options, key=lambda o: o[0])`` (the kept turn whose older
    rounds cost most). Mutant: ``min``; the cheap turn's round is summarised, nothing is
    gained and the history stays over budget (no_gain) while the big file read stays."""
    cheap, costly = _loop("a", "r"), _loop("b", "x" * 2000)
    history = [*cheap, *costly]
    summarizer = Recording("read a file")
    got = compact(history, budget_tokens=300, keep_last_turns=2, summarizer=summarizer)
    assert got.reason == "compacted" and got.summarized_rounds == 1
    assert got.messages[: len(cheap)] == cheap  # the cheap turn verbatim
    assert summarizer.calls == [costly[:3]]  # the request and the round with the big result
    request = got.messages[len(cheap)]
    assert request["content"][0] == {"type": "text", "text": "question b"}
    assert request["content"][-1]["text"].startswith(SUMMARY_HEADER + "\n")
    assert got.messages[len(cheap) + 1 :] == costly[3:]


def _agent_loop(rounds: int) -> list[Message]:
    """One turn: a request, ``rounds`` tool rounds with ~100-token results, an answer."""
    out: list[Message] = [U("find it")]
    for r in range(rounds):
        out += [A([use(f"t{r}", q=str(r))]), U([result(f"t{r}", f"{r}" + "z" * 399)])]
    return [*out, A("found")]


def test_a_round_cut_leaves_room_for_the_summary() -> None:
    """Guard: compaction.py round cut ``fits``: ``count(kept) + allowance <= budget``.
    Mutant: the allowance dropped; the cut keeping one more round is taken though the
    summary then has no room (3 rounds summarised instead of 4)."""
    history = _agent_loop(6)  # round cuts before the assistant messages at 3, 5, 7, 9, 11, 13

    def kept(cut: int) -> int:
        return EST.count([history[0], *history[cut:]])

    budget = kept(7) + 50  # the cut at 7 fits only without the allowance of 100
    assert kept(9) + 100 <= budget
    got = compact(
        history, budget_tokens=budget, keep_last_turns=1, summarizer=Recording(),
        summary_allowance=100,
    )  # fmt: skip
    assert got.reason == "compacted" and got.summarized_rounds == 4
    assert got.messages[1:] == history[9:]


# ---- the Anthropic summariser, through the SDK against the local fake API -------------------


def test_a_refused_summary_is_a_summariser_failure(messages_server: MessagesServer) -> None:
    """Guard: compaction.py ``if reply.stop_reason == "refusal": raise SummarizerError``.
    Mutant: the check dropped; the model's refusal text becomes the "summary" and the
    summarised turns are lost behind it."""
    messages_server.enqueue(text_reply("I can't help with that.", stop_reason="refusal"))
    summarizer = AnthropicSummarizer(messages_server.client(max_retries=0), timeout=5)
    history = text_turns(3)
    got = compact(history, budget_tokens=10, keep_last_turns=1, summarizer=summarizer)
    assert got.reason == "summarizer_failed" and not got.compacted
    assert got.error is not None and "refused" in got.error
    assert got.messages == history


def test_a_max_tokens_over_the_limit_raises_the_limit(messages_server: MessagesServer) -> None:
    """Guard: compaction.py ``max_tokens_limit = max(max_tokens_limit, max_tokens)`` (the
    least reply is never capped below itself). Mutant: the limit taken as given (4096), so
    ``max_tokens=5000`` asks for 4096."""
    messages_server.enqueue(text_reply("Short chat."))
    summarizer = AnthropicSummarizer(messages_server.client(max_retries=0), max_tokens=5000)
    got = compact(
        text_turns(3), budget_tokens=400, keep_last_turns=1, summarizer=summarizer,
        summary_allowance=0,
    )  # fmt: skip
    assert got.compacted, got.error
    (request,) = messages_server.message_requests
    assert request.body["max_tokens"] == 5000


def test_a_gain_of_exactly_a_quarter_of_the_excess_is_kept() -> None:
    """Guard: compaction.py no_gain: ``(before - after) * 4 < before - budget`` (a result
    still over budget is kept when at least a quarter of the excess went). Mutant: ``<=``;
    a gain of exactly a quarter is thrown away as no_gain."""
    history = [*text_turns(1), *text_turns(2, chars=8000)]  # a small turn, then two large
    before = EST.count(history)
    probe = compact(history, budget_tokens=before - 1, keep_last_turns=2, summarizer=Recording())
    assert probe.reason == "compacted" and probe.summarized_turns == 1  # the one cut there is
    assert probe.tokens_before is not None and probe.tokens_after is not None
    gain = probe.tokens_before - probe.tokens_after
    budget = probe.tokens_before - 4 * gain  # the gain is exactly a quarter of the excess
    assert probe.tokens_after > budget
    got = compact(history, budget_tokens=budget, keep_last_turns=2, summarizer=Recording())
    assert got.reason == "over_budget" and got.compacted
    assert got.tokens_after == probe.tokens_after and got.messages == probe.messages


class Scribbler:
    """A summariser that edits the messages it is given in place (blocks and all), then
    fails or answers."""

    max_tokens = 1024

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        for msg in messages:
            content = msg["content"]
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, dict):
                        block["text"] = "scribbled"
                        block.pop("content", None)
                content.append({"type": "text", "text": "scribbled"})
            if isinstance(msg, dict):
                msg["role"] = "assistant"
        if self.fail:
            raise RuntimeError("model down")
        return "summary"


@pytest.mark.parametrize("fail", [True, False], ids=["failing", "answering"])
def test_a_summariser_that_edits_its_input_changes_nothing_of_ours(fail: bool) -> None:
    """Guard: compaction.py ``summarizer.summarize(copy.deepcopy(messages))``. Mutant: the
    messages handed over as they are; a summariser that writes into them alters the
    caller's history (blocks are the caller's own dicts) and, on failure, the "unchanged"
    history returned."""
    history = [
        U([{"type": "text", "text": "Where is order 1234? " * 20}]),
        A([{"type": "text", "text": "checking"}, use("t1", id=1234)]),
        U([result("t1", [{"type": "text", "text": "in Berlin"}])]),
        A([{"type": "text", "text": "It is in Berlin."}]),
        *text_turns(2),
    ]
    original = copy.deepcopy(history)
    got = compact(history, budget_tokens=450, keep_last_turns=2, summarizer=Scribbler(fail))
    assert history == original  # the input is never mutated
    if fail:
        assert got.reason == "summarizer_failed" and got.messages == original
    else:
        assert got.compacted and got.messages[1:] == original[5:]


# ---- what the summariser reads of an oversize message ------------------------------------


def _texts(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    for m in messages:
        content = m["content"]
        if isinstance(content, str):
            out.append(content)
        else:
            out += [b["text"] for b in content if b.get("type") == "text"]
    return out


def test_a_shortened_text_is_never_longer_than_the_original() -> None:
    """Guard: compaction_summary.py ``_cut``: ``if gone <= len(mark): return text`` (a text
    only a little over what it may keep stays whole: the placeholder would lengthen it).
    Mutant: ``gone < 0``; a text a few characters over is "shortened" to head, placeholder
    and tail, longer than itself, and the summariser is told characters were left out."""
    big, small = "a" * 4000, "b" * 300
    history = [
        U([{"type": "text", "text": big}, {"type": "text", "text": small}]),
        A("ok"),
        U("next"),
        A("fine"),
    ]
    seen = 0
    for bound in range(300, 480, 3):  # the characters each text keeps sweep past len(small)
        summarizer = Recording()
        compact(
            history, budget_tokens=20, keep_last_turns=1, summarizer=summarizer,
            summary_allowance=0, summarizer_input_tokens=bound,
        )  # fmt: skip
        read_big, read_small = _texts(summarizer.calls[0][:1])
        assert len(read_big) < len(big) and "characters left out" in read_big
        assert len(read_small) <= len(small)
        assert read_small == small or "characters left out" in read_small
        seen += read_small == small
    assert 0 < seen < len(range(300, 480, 3))  # both sides of the small text's length met


@pytest.mark.parametrize("over", [1, 5, 10])
def test_a_message_just_over_the_summariser_bound_is_shortened(over: int) -> None:
    """Guard: compaction_summary.py ``if cost > bound:`` (a unit larger than the bound is
    shortened before any call). Mutant: ``cost > bound + 10``; a message a few tokens over
    the bound goes to the summariser whole, over ``summarizer_input_tokens``."""
    bound = 200
    first = U("x" * (4 * (bound + over - 4)))  # 4 + chars / 4 = bound + over tokens
    assert EST.count([first]) == bound + over
    history = [first, A("ok"), U("next"), A("fine")]
    summarizer = Recording()
    got = compact(
        history, budget_tokens=20, keep_last_turns=1, summarizer=summarizer,
        summarizer_input_tokens=bound,
    )  # fmt: skip
    assert got.summarizer_calls == len(summarizer.calls) >= 1
    assert all(EST.count(call) <= bound for call in summarizer.calls)
    assert "characters left out" in _texts(summarizer.calls[0])[0]


# ---- token estimates never under-count -----------------------------------------------------

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iV"}}


def test_an_image_inside_a_content_document_is_counted_as_an_image() -> None:
    """Guarantee: EstimateTokenCounter never under-counts what the model reads. An image
    costs MEDIA_TOKENS at the top level and inside a tool_result; inside a custom content
    document (a source the API and the SDK accept with image blocks:
    ContentBlockSourceContentParam = TextBlockParam | ImageBlockParam) it cost 2 tokens
    (read as the text "[image]"), so a history of such documents read as far under budget
    and compaction never ran (a real bug, found by the audit; fixed in history._media_tokens)."""
    doc = {
        "type": "document",
        "source": {"type": "content", "content": [{"type": "text", "text": "see figure"}, IMAGE]},
    }
    alone = EST.count([U([IMAGE])])
    assert alone >= 1600
    in_result = EST.count([U([result("t1", [IMAGE])])])
    assert in_result >= 1600
    history = [U([doc]), A("ok")]
    assert validate_history(history) == []
    assert EST.count([U([doc])]) >= 1600  # was 9
    out = compact(history, budget_tokens=100, summarizer=Recording())
    assert out.reason != "under_budget" and out.tokens_before >= 1600, out


class Condensing:
    """A summariser that writes ``long`` for a chunk and ``short`` when it reads only a
    summary so far (a condensing call)."""

    max_tokens = 1024

    def __init__(self, long: str) -> None:
        self.long = long
        self.calls: list[list[Message]] = []

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        self.calls.append(copy.deepcopy([dict(m) for m in messages]))
        only = len(messages) == 1 and _texts(messages)[0].startswith(SUMMARY_HEADER + "\n")
        return "short" if only else self.long


@pytest.mark.parametrize("over", [1, 5, 10])
def test_a_summary_so_far_just_crowding_the_next_unit_is_condensed_first(over: int) -> None:
    """Guard: compaction_summary.py ``if held + costs[i] > bound >= costs[i]:`` (the summary
    so far plus the next unit over the bound: condense it first). Mutant: ``> bound + 10``;
    a call a few tokens over ``summarizer_input_tokens`` is made."""
    bound = 200
    x0 = U("a" * 544)  # 140 tokens: the first chunk alone (3/4 of the bound is 150)
    x1, x2 = A("b" * 184), U("c" * 184)  # 50 + 50: the next unit
    history = [x0, x1, x2, A("ok"), U("next"), A("fine")]
    assert EST.count([x0]) == 140 and EST.count([x1, x2]) == 100
    long = (
        next(  # a summary so far of 100 + over tokens: with the 100 of x1, x2 that is bound + over
            "s" * n
            for n in range(2000)
            if EST.count([U([{"type": "text", "text": f"{SUMMARY_HEADER}\n{'s' * n}"}])])
            == 100 + over
        )
    )
    summarizer = Condensing(long)
    compact(
        history, budget_tokens=20, keep_last_turns=1, summarizer=summarizer,
        summary_allowance=0, summarizer_input_tokens=bound,
    )  # fmt: skip
    assert [EST.count(c) for c in summarizer.calls if EST.count(c) > bound] == []
    assert any(len(c) == 1 and _texts(c)[0].endswith(long) for c in summarizer.calls)


def test_a_pdf_of_unknown_pages_is_counted_by_its_size_rounded_up() -> None:
    """Guard: history.py ``_pdf_pages``: ``max(1, math.ceil(size / PDF_BYTES_PER_PAGE))``
    (a PDF whose page objects cannot be read costs one page per 50 kB begun). Mutant:
    ``size // PDF_BYTES_PER_PAGE``; 60 kB counts as one page, an under-count."""
    data = base64.b64encode(b"%PDF-1.7 " + b"x" * 60_000).decode()
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": data},
    }
    assert EST.count([U([pdf])]) >= 2 * PDF_PAGE_TOKENS
    assert EST.count([U([result("t1", [pdf])])]) >= 2 * PDF_PAGE_TOKENS


# ---- shape checks and turn starts ----------------------------------------------------------


def test_a_message_field_the_api_does_not_know_is_an_input_error() -> None:
    """Guard: history.py plain_messages ``if key not in ("role", "content")``. Mutant: only
    OpenAI-style fields refused (``key in _OPENAI_FIELDS``); a message with a ``timestamp``
    is taken, and the API rejects the request the agent sends after compaction."""
    history = [U("q"), {"role": "assistant", "content": "a", "timestamp": "2026-12-05"}]
    with pytest.raises(InputError, match=r"message 1: field timestamp: not a Messages API"):
        compact(history, budget_tokens=10**6, summarizer=Recording())
    with pytest.raises(InputError, match=r"message 1: field timestamp"):
        EST.count(history)


def test_a_nan_in_a_tool_input_is_an_input_error() -> None:
    """Guard: history.py ``json.dumps(args, ..., allow_nan=False)`` (a tool input must be
    JSON). Mutant: NaN allowed; the history is taken and the request is not valid JSON."""
    history = [U("q"), A([use("t1", x=float("nan"))]), U([result("t1")])]
    with pytest.raises(InputError, match=r"message 1: block 0, field input: not JSON"):
        compact(history, budget_tokens=10**6, summarizer=Recording())


def test_two_assistant_messages_in_a_row_are_named() -> None:
    """Guard: history.py validate_history ``messages[i - 1].get("role") == role`` (roles
    alternate). Mutant: only repeated user messages flagged; two assistant messages in a
    row pass, and compact would keep a history the API rejects."""
    history = [U("q"), A("a"), A("b")]
    assert "message 2: role 'assistant' repeats; roles must alternate" in validate_history(history)
    got = compact(history, budget_tokens=0, summarizer=Recording())
    assert got.reason == "invalid_input" and got.messages == history


def test_the_default_summariser_takes_an_auth_token_alone(
    messages_server: MessagesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guard: compaction_summary.py anthropic_client: ``ANTHROPIC_API_KEY or
    ANTHROPIC_AUTH_TOKEN`` (either credential the SDK reads configures the default
    summariser). Mutant: only ANTHROPIC_API_KEY; a deployment with a bearer token gets
    "no model configured" on every compaction."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "fake-bearer-token")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    messages_server.enqueue(text_reply("The user wrote letters."))
    got = compact(
        text_turns(3), budget_tokens=400, keep_last_turns=1,
        summarizer=AnthropicSummarizer(max_retries=0), summary_allowance=0,
    )  # fmt: skip
    assert got.compacted, got.error
    (request,) = messages_server.message_requests
    assert request.headers.get("authorization") == "Bearer fake-bearer-token"


# ---- argument checks of the online library (inputs.py) -------------------------------------


@pytest.fixture()
def memory(home: Path) -> Iterator[Memory]:
    home.mkdir(parents=True, exist_ok=True)
    with Memory(f"sqlite:///{home / 'm.db'}", ledger=home / "ledger") as m:
        yield m


def test_a_format_character_outside_the_default_ignorables_is_refused_in_an_actor(
    memory: Memory,
) -> None:
    """Guard: text.py ``invisible``: category ``Cf`` among the invisible ones. Mutant:
    ``Cf`` dropped from the list; U+FFF9 (interlinear annotation anchor, a format
    character not in DEFAULT_IGNORABLE) slips into an actor id that looks like "u1", and
    a subject of only that character is kept as a key nobody can read."""
    with pytest.raises(InputError, match=r"actor has an invisible character \(U\+FFF9\)"):
        memory.remember("I collect stamps.", actor="u1\ufff9")
    with pytest.raises(InputError, match="actor has an invisible character"):
        memory.recall("stamps", actor="u1\ufff9")
    assert list(memory.store.list_actors()) == []
    r = memory.remember("I collect stamps.", actor="u1", subject="\ufff9")
    assert memory.store.get(r.id).subject != "\ufff9"  # type: ignore[union-attr]


class _NoOffset(tzinfo):
    """A tzinfo that knows no offset: Python treats such a datetime as naive."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str | None:
        return None


def test_an_at_whose_tzinfo_has_no_offset_is_refused_as_naive(memory: Memory) -> None:
    """Guard: inputs.py at_arg ``at.tzinfo is None or at.utcoffset() is None``. Mutant:
    only ``tzinfo is None``; a datetime whose tzinfo gives no offset (naive by Python's
    definition) is read in the machine's local zone and stored as if it were UTC."""
    at = datetime(2026, 1, 5, 12, tzinfo=_NoOffset())
    assert at.utcoffset() is None
    with pytest.raises(InputError, match="naive"):
        memory.remember("I collect stamps.", actor="u1", at=at)
    assert list(memory.store.list_actors()) == []


def test_forget_refuses_a_mapping_of_ids(memory: Memory) -> None:
    """Guard: inputs.py ids_arg refuses a ``dict`` (``bytes | bytearray | dict``). Mutant:
    ``dict`` dropped; ``forget({id: ...})`` forgets the mapping's keys, a call that meant
    something else changes records."""
    r = memory.remember("I collect stamps.", actor="u1")
    with pytest.raises(InputError, match="ids must be a record id or a list of ids, not dict"):
        memory.forget({r.id: "why"}, actor="u1")  # type: ignore[arg-type]
    assert [h.id for h in memory.recall("stamps", actor="u1", threshold=-1)] == [r.id]


def test_a_tool_input_that_is_not_an_object_is_an_input_error() -> None:
    """Guard: history.py ``if not isinstance(args, Mapping)`` (a tool input is a JSON
    object). Mutant: only ``None`` refused; a string or list input is taken and the API
    rejects the history after compaction."""
    for bad in ("q=1", [1, 2]):
        history = [U("q"), A([{"type": "tool_use", "id": "t1", "name": "f", "input": bad}])]
        history.append(U([result("t1")]))
        with pytest.raises(InputError, match=r"message 1: block 0, field input: a (str|list), not"):
            compact(history, budget_tokens=10**6, summarizer=Recording())


@pytest.mark.parametrize("threshold", [1.2, -1.2])
def test_a_threshold_outside_minus_one_to_one_is_refused(memory: Memory, threshold: float) -> None:
    """Guard: inputs.py cosine_arg ``-1 <= value <= 1`` (LongTermMemory's ``threshold`` and
    ``near_duplicate``). Mutant: ``<= 1.5`` (and ``-1.5 <=``); a bound no cosine can reach
    is taken and every recall silently finds nothing, every restatement is new."""
    for name in ("threshold", "near_duplicate"):
        with pytest.raises(InputError, match=f"{name} must be a cosine from -1 to 1"):
            LongTermMemory(memory.store, **{name: threshold})  # type: ignore[arg-type]


def test_a_naive_stored_time_is_read_as_utc() -> None:
    """Guard: inputs.py stored_time ``if value is None or value.tzinfo is not None: return
    value`` (only a naive time is made aware, as UTC). Mutant: every value returned as it
    is; a naive time written before session 26 fails any comparison with an aware one."""
    naive = datetime(2026, 1, 5, 12)
    got = stored_time(naive)
    assert got == datetime(2026, 1, 5, 12, tzinfo=UTC) and got.tzinfo is UTC
    assert got <= datetime(2026, 1, 6, tzinfo=UTC)  # comparable with an aware time
    aware = datetime(2026, 1, 5, 12, tzinfo=timezone(timedelta(hours=2)))
    assert stored_time(aware) is aware and stored_time(None) is None


def test_recall_refuses_a_bool_threshold(memory: Memory) -> None:
    """Guard: inputs.py number_in ``not isinstance(value, bool)`` (recall's ``threshold``).
    Mutant: the bool test dropped; ``threshold=True`` is read as a cosine of 1 and recall
    silently finds nothing."""
    memory.remember("I collect stamps.", actor="u1")
    for flag in (True, False):
        with pytest.raises(InputError, match="threshold must be a cosine from -1 to 1"):
            memory.recall("stamps", actor="u1", threshold=flag)


def test_the_api_counter_checks_shapes_before_any_request(messages_server: MessagesServer) -> None:
    """Guard: history.py AnthropicTokenCounter.count ``messages = plain_messages(messages)``
    (a malformed message is an InputError, never a count). Mutant: the messages sent as
    given; the endpoint's answer (or the fallback) is taken for a history the API rejects."""
    counter = AnthropicTokenCounter(messages_server.client(max_retries=0))
    bad = [U("q"), {"role": "tool", "content": "result"}]
    with pytest.raises(InputError, match=r"message 1: field role: 'tool'"):
        counter.count(bad)
    assert messages_server.requests == []


def test_thinking_that_opens_the_current_turn_is_counted() -> None:
    """Guard: history.py EstimateTokenCounter ``i >= current`` (thinking from the current
    turn's first message on is read by the model, so counted). Mutant: ``i > current``;
    a part that opens with the assistant's thinking (a cut at an explicit turn start at an
    assistant message, an agent loop with no user text after it) under-counts it."""
    thinking = {"type": "thinking", "thinking": "t" * 4000, "signature": "sig"}
    part = [A([thinking, use("t1")]), U([result("t1")])]
    assert EST.count(part) >= 1000
    history = [U("q"), *part, A("done")]
    assert EST.count(history) >= 1000  # the last user text is message 0: all thinking counts


def test_a_text_document_costs_its_text_not_pdf_pages() -> None:
    """Guard: history.py _media_tokens ``if _document_text(block) is not None: return 0``
    (a plain-text or content document is read as text). Mutant: the check dropped; a
    short text document also costs a PDF page (3,000 tokens), and compaction summarises
    turns the budget had room for."""
    doc = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "d" * 400},
    }
    assert EST.count([U([doc])]) == 4 + 100
    history = [U([doc]), A("read it"), U("and?"), A("fine")]
    got = compact(history, budget_tokens=200, summarizer=Recording())
    assert got.reason == "under_budget" and got.messages == history


def test_text_blocks_inside_a_tool_result_are_counted() -> None:
    """Guard: history.py _block_text for a tool_result whose content is a list of blocks
    (``"".join(_block_text(b) for b in ...)``). Mutant: such a result read as ""; a file
    read returned as text blocks costs nothing and compaction never starts."""
    history = [
        U("read it"),
        A([use("t1", path="a.txt")]),
        U([result("t1", [{"type": "text", "text": "f" * 40_000}])]),
        A("done"),
    ]
    assert EST.count(history) >= 10_000
    got = compact(history, budget_tokens=5_000, summarizer=Recording())
    assert got.reason != "under_budget" and got.tokens_before is not None
    assert got.tokens_before >= 10_000


def test_the_transcript_leaves_out_opaque_fields_of_server_tool_results() -> None:
    """Guard: history.py _visible ``if k not in _OPAQUE_KEYS`` (encrypted content, base64
    data, signatures never reach the summariser). Mutant: every field shown; the summary
    model reads (and may copy) kilobytes of ciphertext."""
    secret = "ENCRYPTED" + "Q" * 200
    block = {
        "type": "web_search_tool_result",
        "tool_use_id": "srv_1",
        "content": [{"type": "web_search_result", "title": "Tea", "url": "https://t.example",
                     "encrypted_content": secret}],
    }  # fmt: skip
    text = render_transcript([U("q"), A([block])])
    assert "Server tool result [srv_1]" in text and "https://t.example" in text
    assert "ENCRYPTED" not in text


# ---- a property: compaction is idempotent and keeps the newest turns ---------------------


@st.composite
def _histories(draw: st.DrawFn) -> list[Message]:
    msgs: list[Message] = []
    for t in range(draw(st.integers(1, 6))):
        msgs.append(U(f"q{t} " + "w" * draw(st.integers(1, 300))))
        for r in range(draw(st.integers(0, 3))):
            uid = f"t{t}_{r}"
            msgs += [A([use(uid, q=str(r))]), U([result(uid, "r" * draw(st.integers(1, 300)))])]
        msgs.append(A(f"a{t} " + "v" * draw(st.integers(1, 300))))
    return msgs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=_histories(), budget=st.integers(20, 600), keep=st.integers(1, 3))
def test_compacting_a_compacted_history_again_changes_nothing(
    history: list[Message], budget: int, keep: int
) -> None:
    """Guarantees: a compacted history that fits is left as it is by the next call with the
    same budget (under_budget, the very Conversation returned); the output is a valid
    history whose newest message, and at least the newest ``keep`` turns' messages after
    the one holding the summary, are the input's, verbatim and in order."""
    got = compact(history, budget_tokens=budget, keep_last_turns=keep, summarizer=Recording())
    assert validate_history(got.messages, allow_pending_tool_use=True) == []
    if not got.compacted:
        assert got.messages == history
        return
    assert got.messages[-1] == history[-1]
    if got.summarized_rounds == 0:  # whole turns only: the kept tail is the input's tail
        assert got.messages[1:] == history[len(history) - len(got.messages) + 1 :]
    again = compact(
        got.conversation, budget_tokens=budget, keep_last_turns=keep, summarizer=Recording()
    )
    if got.reason == "compacted":
        assert again.reason == "under_budget" and again.conversation is got.conversation
