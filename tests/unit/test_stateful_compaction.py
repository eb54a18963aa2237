"""Stateful (model-based) test of short-term compaction (session 41).

The machine plays an agent's conversation: it appends messages to the history it holds
(``live``) and compacts it now and then with :func:`memlife.compact`, keeping the output as
its new history, the way the example agent loop does. The model is the simplest truth: the
full conversation as appended (``model``), never compacted.

Rules: append a user message (plain, unicode, huge, content blocks of several kinds,
text in summary form), an assistant text (with thinking), an assistant tool call (one or
several in parallel), its tool results (any order, several content kinds, errors, text
after them; possibly after a compaction ran while the call was pending); a whole turn at
once (a request, tool rounds, an answer); change the budget, ``keep_last_turns``, the
summariser's input bound and the token counter (estimate, or count_tokens); compact
with each summariser the project offers (a ``Summarizer`` object; ``AnthropicSummarizer``
through the real SDK against the fake Messages API; failing ones: raising, empty, a 400,
a reply cut at max_tokens, a refusal), with derived or explicit turn starts; offer an
invalid next message (a system message, a role repeat, blank content, an orphan or a
missing tool_result, OpenAI tool_calls) that compaction must refuse without a change.

Invariants (after every step): the history is one the Messages API accepts (our validator
and the fake server's); every message of it is a model message, byte-identical, or one
with compaction's own marked summary blocks added (first or last block) whose other
blocks equal the model's, in the model's order; every summary in it is a reply a
summariser gave (never an error text); the newest message is kept. After each compaction:
``compacted`` fits the budget (recounted), ``over_budget`` gained a quarter of the excess,
any other reason leaves the input untouched; the input is never mutated; the dropped
messages are the ones ``summarized_messages`` counts; the last ``keep_last_turns`` turns
stay; a failing summariser fails as ``summarizer_failed``; compacting a ``compacted``
output again is ``under_budget`` with no summariser call.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import anthropic
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from memlife.errors import InputError
from memlife.online.compaction import (
    SUMMARY_HEADER,
    AnthropicSummarizer,
    AnthropicTokenCounter,
    CompactionResult,
    Conversation,
    EstimateTokenCounter,
    Message,
    TokenCounter,
    compact,
    derive_turn_starts,
    validate_history,
)
from memlife.online.compaction_summary import _own_body, is_own_summary
from tests.fakes.messages_api import (
    MessagesServer,
    Reply,
    check_messages_request,
    invalid_request_error,
    text_reply,
)

EXAMPLES = int(os.environ.get("MEMLIFE_STATEFUL_EXAMPLES", "50"))
# hunting aids: MEMLIFE_STATEFUL_RANDOM=1 (new sequences), MEMLIFE_STATEFUL_NOSHRINK=1
PHASES = [
    p for p in Phase if p is not Phase.shrink or not os.environ.get("MEMLIFE_STATEFUL_NOSHRINK")
]
WORDS = ["tea", "Berlin", "café", "日本語", "🙂", "שלום", "a\u200bb", "e\u0301", "{x}", "42"]
words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}


def dump(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False)


def blocks(content: object) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def is_own(block: object) -> bool:
    return isinstance(block, Mapping) and is_own_summary(block)


def stripped(msg: Mapping[str, Any]) -> str:
    """A message without compaction's own summary blocks, as comparable text."""
    return dump([msg["role"], [b for b in blocks(msg["content"]) if not is_own(b)]])


def is_pure_summary(msg: Mapping[str, Any]) -> bool:
    return msg["role"] == "user" and all(is_own(b) for b in blocks(msg["content"]))


@st.composite
def user_content(draw: st.DrawFn) -> str | list[dict[str, Any]]:
    kind = draw(st.sampled_from(["text", "text", "huge", "blocks", "summary_form"]))
    if kind == "text":
        return draw(words)
    if kind == "huge":  # a pasted file: bigger than a small summariser bound by itself
        return draw(st.sampled_from(["x", "日", "ab "])) * draw(st.sampled_from([3000, 40_000]))
    if kind == "summary_form":  # the user's text that merely looks like compaction's own
        mark = draw(st.sampled_from(["", "\n[memlife summary 0123456789abcdef]"]))
        return f"{SUMMARY_HEADER}\n{draw(words)}{mark}"
    out: list[dict[str, Any]] = [{"type": "text", "text": draw(words)}]
    for extra in draw(st.lists(st.sampled_from(["text", "image", "doc"]), max_size=3)):
        if extra == "text":
            out.append({"type": "text", "text": draw(words)})
        elif extra == "image":
            out.append(copy.deepcopy(IMAGE))
        else:
            src = {"type": "text", "media_type": "text/plain", "data": draw(words)}
            out.append({"type": "document", "source": src})
    return draw(st.permutations(out))


class ScriptedSummarizer:
    """A ``Summarizer`` object: a fixed or message-counting reply, or a failure."""

    def __init__(self, mode: str, replies: set[str] | None = None, bound: int = 10**9) -> None:
        self.mode, self.calls, self.bound = mode, 0, bound
        self.replies = set() if replies is None else replies
        self.bad: list[str] = []  # what a read broke (compact turns an assert into a failure)

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        self.calls += 1
        # every chunk the summariser reads is a valid history, within the bound
        self.bad += validate_history(messages, allow_pending_tool_use=True)
        if (tokens := EstimateTokenCounter().count(messages)) > self.bound:
            self.bad.append(f"a call of {tokens} tokens, bound {self.bound}")
        if self.mode == "raise":
            raise RuntimeError("model down: HTTP 529 overloaded")
        if self.mode == "empty":
            return "  \n "
        if self.mode == "long":
            self.replies.add(("The user said many things. " * 120).strip())
            return "The user said many things. " * 120
        if self.mode == "summary_like":  # a reply already in compaction's summary form
            reply = f"{SUMMARY_HEADER}\nolder notes\n[memlife summary 0000000000000000]"
            self.replies.add(reply)
            return reply
        reply = f"They covered {len(messages)} messages about tea and Berlin."
        self.replies.add(reply)
        return reply


GOOD_LOCAL = ("fixed", "long", "summary_like")
GOOD_SERVER = "server_ok"
FAILING = ("raise", "empty", "server_400", "server_truncated", "server_refusal", "server_empty")
SERVER_REPLY = "  Order 1234 ships to Berlin; the user prefers tea.  "


class CompactionMachine(RuleBasedStateMachine):
    server: MessagesServer  # set by the test before the machine runs
    client: anthropic.Anthropic  # one real SDK client aimed at it, reused

    def __init__(self) -> None:
        super().__init__()
        self.live: list[Message] = []  # what the agent holds (compacted outputs + appends)
        self.model: list[Message] = []  # the truth: everything appended, never compacted
        self.pending: list[str] = []  # ids of tool calls not yet answered
        self.next_id = 0
        self.fraction, self.keep, self.bound, self.counter_kind = 0.5, 2, 100_000, "estimate"
        self.replies: set[str] = set()  # summaries some summariser gave
        self.server.reset()
        self.server.set_handler(self._serve)
        self.server_mode = GOOD_SERVER

    # ---- helpers --------------------------------------------------------------------------

    def _serve(self, body: dict[str, Any]) -> Reply:
        mode = self.server_mode
        if mode == "server_400":
            return invalid_request_error("prompt is too long")
        if mode == "server_truncated":
            return text_reply("cut off mid sen", stop_reason="max_tokens")
        if mode == "server_refusal":
            return text_reply("I can't", stop_reason="refusal")
        if mode == "server_empty":
            return text_reply("   ")
        return text_reply(SERVER_REPLY)

    def _counter(self) -> TokenCounter:
        if self.counter_kind == "sdk":
            return AnthropicTokenCounter(self.client, fallback=None, timeout=3.0)
        return EstimateTokenCounter()

    def _append(self, msg: Message) -> None:
        self.live.append(copy.deepcopy(msg))
        self.model.append(copy.deepcopy(msg))

    def _last_role(self) -> str | None:
        return self.live[-1]["role"] if self.live else None

    def _uid(self) -> str:
        self.next_id += 1
        return f"toolu_{self.next_id:04d}"

    # ---- rules: the conversation ----------------------------------------------------------

    @precondition(lambda self: self._last_role() in (None, "assistant") and not self.pending)
    @rule(content=user_content())
    def user_message(self, content: str | list[dict[str, Any]]) -> None:
        self._append({"role": "user", "content": content})

    @precondition(lambda self: self._last_role() == "user")
    @rule(text=words, thinking=st.booleans(), as_blocks=st.booleans())
    def assistant_text(self, text: str, thinking: bool, as_blocks: bool) -> None:
        content: Any = text
        if thinking or as_blocks:
            content = [{"type": "text", "text": text}]
        if thinking:
            content.insert(0, {"type": "thinking", "thinking": "hmm " * 20, "signature": "c2ln"})
        self._append({"role": "assistant", "content": content})

    @precondition(lambda self: self._last_role() == "user")
    @rule(
        n=st.integers(1, 3),
        preface=st.booleans(),
        arg=st.one_of(words, st.just("q" * 30_000)),
    )
    def assistant_tool_calls(self, n: int, preface: bool, arg: str) -> None:
        content: list[dict[str, Any]] = (
            [{"type": "text", "text": "Let me look."}] if preface else []
        )
        for k in range(n):
            uid = self._uid()
            self.pending.append(uid)
            content.append({"type": "tool_use", "id": uid, "name": f"t{k}", "input": {"q": arg}})
        self._append({"role": "assistant", "content": content})

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data(), trailing=st.booleans())
    def tool_results(self, data: st.DataObject, trailing: bool) -> None:
        content: list[dict[str, Any]] = []
        for uid in data.draw(st.permutations(self.pending)):
            kind = data.draw(st.sampled_from(["str", "blocks", "image", "error", "none", "huge"]))
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": uid}
            if kind == "str":
                block["content"] = data.draw(words)
            elif kind == "blocks":
                block["content"] = [{"type": "text", "text": data.draw(words)}]
            elif kind == "image":
                block["content"] = [{"type": "text", "text": "chart"}, copy.deepcopy(IMAGE)]
            elif kind == "error":
                block.update(content="ENOENT: no such file", is_error=True)
            elif kind == "huge":
                block["content"] = "line of a big log\n" * 3000
            content.append(block)
        if trailing:
            content.append({"type": "text", "text": data.draw(words)})
        self.pending = []
        self._append({"role": "user", "content": content})

    @precondition(lambda self: self._last_role() in (None, "assistant") and not self.pending)
    @rule(request=user_content(), rounds=st.integers(0, 3), parallel=st.integers(1, 2))
    def whole_turn(self, request: str | list[dict[str, Any]], rounds: int, parallel: int) -> None:
        """A request, ``rounds`` tool rounds (``parallel`` calls each), then an answer."""
        self._append({"role": "user", "content": request})
        for r in range(rounds):
            uids = [self._uid() for _ in range(parallel)]
            uses = [{"type": "tool_use", "id": u, "name": "f", "input": {"r": r}} for u in uids]
            self._append({"role": "assistant", "content": uses})
            res = [{"type": "tool_result", "tool_use_id": u, "content": "tea " * 40} for u in uids]
            self._append({"role": "user", "content": res[::-1]})
        self._append({"role": "assistant", "content": "Done: Berlin 日本 " * 10})

    # ---- rules: settings ------------------------------------------------------------------

    @rule(
        fraction=st.sampled_from([0.0, 0.05, 0.2, 0.5, 0.8, 0.97, 1.5]),
        keep=st.integers(1, 3),
        bound=st.sampled_from([100_000, 100_000, 2_000, 300, 40]),
        counter=st.sampled_from(["estimate", "estimate", "sdk"]),
    )
    def configure(self, fraction: float, keep: int, bound: int, counter: str) -> None:
        """The budget (a fraction of the history's count when compacting), the fewest turns
        kept, the summariser's input bound and the token counter."""
        self.fraction, self.keep, self.bound, self.counter_kind = fraction, keep, bound, counter

    # ---- rules: refusals ------------------------------------------------------------------

    @rule(kind=st.sampled_from(["system", "repeat", "blank", "orphan", "missing", "openai"]))
    def invalid_next_message(self, kind: str) -> None:
        role = self._last_role() or "assistant"  # an assistant first is a repeat too
        bad: Message
        if kind == "system":
            bad = {"role": "system", "content": "You are helpful."}
        elif kind == "repeat":
            bad = {"role": role, "content": "again"}
        elif kind == "blank":
            bad = {"role": "assistant" if role == "user" else "user", "content": " \n"}
        elif kind == "orphan":
            orphan = {"type": "tool_result", "tool_use_id": "toolu_nobody", "content": "x"}
            bad = {"role": "user", "content": [orphan]}
        elif kind == "missing" and self.pending:  # one of the parallel calls unanswered
            res = [{"type": "tool_result", "tool_use_id": u, "content": "ok"} for u in self.pending]
            bad = {"role": "user", "content": res[1:] or [{"type": "text", "text": "hi"}]}
        elif kind == "missing":
            bad = {"role": role, "content": "double"}
        else:
            bad = {"role": "assistant", "content": "x", "tool_calls": []}
        before = dump(self.live)
        summarizer = ScriptedSummarizer("fixed")
        history = [*self.live, bad]
        try:
            result = compact(history, budget_tokens=0, summarizer=summarizer)
        except InputError:
            pass  # a clear refusal naming the message
        else:
            assert result.reason == "invalid_input" and not result.compacted, result.reason
            assert result.problems and dump(result.messages) == dump(history)
        assert summarizer.calls == 0 and dump(self.live) == before

    # ---- rule: compaction -----------------------------------------------------------------

    @precondition(lambda self: bool(self.live))
    @rule(
        mode=st.sampled_from([*GOOD_LOCAL, GOOD_SERVER, GOOD_SERVER, *FAILING]),
        explicit=st.none() | st.none() | st.lists(st.booleans(), min_size=1, max_size=40),
    )
    def compact_history(self, mode: str, explicit: list[bool] | None) -> None:
        counter = self._counter()
        budget = int(counter.count(self.live) * self.fraction)
        summarizer: Any
        if mode.startswith("server"):
            self.server_mode = mode
            summarizer = AnthropicSummarizer(self.client, max_tokens=200)
        else:
            summarizer = ScriptedSummarizer(mode, self.replies, self.bound)
        given: Conversation | list[Message] = self.live
        if explicit is not None:  # any start that holds no tool_result, 0 always
            ok = [i for i in range(len(self.live)) if "tool_result" not in dump(self.live[i])]
            picked = [i for k, i in enumerate(ok) if i == 0 or explicit[k % len(explicit)]]
            given = Conversation(self.live, picked)
        before = dump(self.live)
        server_before = len(self.server.message_requests)
        result = compact(
            given,
            budget_tokens=budget,
            keep_last_turns=self.keep,
            summarizer=summarizer,
            counter=counter,
            summarizer_input_tokens=self.bound,
        )
        assert dump(self.live) == before, "the input was mutated"
        self._check_result(result, given, budget, counter, mode)
        if isinstance(summarizer, ScriptedSummarizer):
            assert summarizer.bad == [], summarizer.bad
        if mode in (*GOOD_LOCAL, GOOD_SERVER) and result.reason == "summarizer_failed":
            assert "summarizer_input_tokens" in str(result.error), result.error  # no room
        if mode == GOOD_SERVER:
            self.replies.add(SERVER_REPLY.strip())
        if mode in FAILING and result.reason not in ("under_budget", "too_few_turns"):
            assert result.reason == "summarizer_failed", (mode, result.reason, result.error)
            assert result.error and not result.compacted
        if mode.startswith("server") and result.reason in ("under_budget", "too_few_turns"):
            assert len(self.server.message_requests) == server_before  # no call made
        if result.reason == "compacted":  # stable: compacting the output again is a no-op
            again = ScriptedSummarizer("raise")
            second = compact(
                result.conversation,
                budget_tokens=budget,
                keep_last_turns=self.keep,
                summarizer=again,
                counter=counter,
                summarizer_input_tokens=self.bound,
            )
            assert second.reason == "under_budget" and again.calls == 0, second.reason
            assert dump(second.messages) == dump(result.messages)
        self.live = copy.deepcopy(result.messages)

    def _check_result(
        self,
        result: CompactionResult,
        given: Conversation | list[Message],
        budget: int,
        counter: TokenCounter,
        mode: str,
    ) -> None:
        inp, out = self.live, result.messages
        assert result.budget_tokens == budget
        if not result.compacted:
            assert result.reason != "compacted" and result.reason != "over_budget"
            assert dump(out) == dump(inp), result.reason
            assert result.reason not in ("invalid_input", "invalid_output"), result.error
            assert result.reason != "counter_failed", result.error
            if result.reason == "under_budget":
                assert counter.count(inp) <= budget
            else:
                assert counter.count(inp) > budget, result.reason
            return
        assert result.summary and mode not in FAILING
        if (starts_out := result.conversation.turn_starts) is not None:  # still valid starts
            assert Conversation(out, starts_out).starts() == starts_out
        after = counter.count(out)
        before = counter.count(inp)
        assert result.tokens_after == after and result.tokens_before == before
        assert after < before
        if result.reason == "compacted":
            assert after <= budget
        else:
            assert result.reason == "over_budget" and after > budget
            assert (before - after) * 4 >= before - budget
        # the dropped messages are the ones summarized_messages counts
        new_pure = 1 if result.summarized_turns and is_pure_summary(out[0]) else 0
        assert result.summarized_messages == len(inp) - len(out) + new_pure, (
            result.summarized_messages,
            len(inp),
            len(out),
        )
        # the newest message stays (a summary prepended at most), as do the last turns
        assert stripped(out[-1]) == stripped(inp[-1])
        starts = given.starts() if isinstance(given, Conversation) else derive_turn_starts(inp)
        if result.summarized_rounds == 0 and len(starts) >= self.keep:
            tail = inp[starts[-self.keep] :]
            assert [stripped(m) for m in out[-len(tail) :]] == [stripped(m) for m in tail]
            assert dump(out[len(out) - len(tail) + 1 :]) == dump(tail[1:])

    # ---- invariants -----------------------------------------------------------------------

    @invariant()
    def history_is_accepted_by_the_api(self) -> None:
        if not self.live:
            return
        problems = validate_history(self.live, allow_pending_tool_use=True)
        assert problems == [], problems
        body = {"model": "m", "max_tokens": 1, "messages": self.live}
        assert check_messages_request(body, require_max_tokens=True) is None

    @invariant()
    def every_message_is_the_models_in_order(self) -> None:
        j = 0
        for k, msg in enumerate(self.live):
            own = [p for p, b in enumerate(blocks(msg["content"])) if is_own(b)]
            n = len(blocks(msg["content"]))
            assert all(p in (0, n - 1) for p in own), f"summary block inside message {k}"
            if is_pure_summary(msg):
                assert k == 0, "a summary message after the first"
                continue
            key = stripped(msg)
            while j < len(self.model) and stripped(self.model[j]) != key:
                j += 1
            assert j < len(self.model), f"message {k} is not one of the model's (in order)"
            if not own:
                assert dump(msg) == dump(self.model[j]), f"message {k} not byte-identical"
            j += 1
        if self.live:
            assert stripped(self.live[-1]) == stripped(self.model[-1]), "the newest message"

    @invariant()
    def summaries_are_summariser_replies(self) -> None:
        for msg in self.live:
            for b in blocks(msg["content"]):
                if is_own(b):
                    body = _own_body(b["text"])
                    assert body in self.replies, body
                    assert "Error" not in body and "failed" not in body


def test_compaction_state_machine() -> None:
    with MessagesServer() as server:
        CompactionMachine.server = server
        CompactionMachine.client = server.client(max_retries=0, timeout=5.0)
        run_state_machine_as_test(
            CompactionMachine,
            settings=settings(
                max_examples=EXAMPLES,
                phases=PHASES,
                stateful_step_count=40,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
                derandomize=not os.environ.get("MEMLIFE_STATEFUL_RANDOM"),
            ),
        )
