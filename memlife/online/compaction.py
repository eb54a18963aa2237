"""Short-term compaction of an agent's conversation (Messages API message lists).

Past a token budget, older turns are replaced by a model written summary and the newest
kept verbatim. The result is always a history the Messages API accepts (see
:func:`validate_history`). A cut falls only at a turn start (a user message with no
``tool_result``; or explicit starts under the same rule, checked again on every call), so
a tool call (parallel calls included) is never parted from its results.

How much: ``keep_last_turns`` is the fewest turns kept. Of the cuts that keep at least
that many, the one that keeps the most while the kept part plus a summary allowance
(``summary_allowance``; by default the summariser's ``max_tokens``, at most an eighth of
the budget) fits; nothing the budget allows is summarised. If none fits, the farthest.

Tool rounds: when that leaves the history over budget, or no whole turn can go (an agent
loop: one request, then round after round, all one turn; or a long finished loop and a
short question), the older rounds of the kept turn where that saves most are summarised:
its request stays verbatim with the summary as its last block (compaction's own earlier
summaries there, which the summariser read, replaced), and the cut falls before an
assistant message that follows tool results (each summarised ``tool_use`` goes with its
results). At least ``keep_last_turns`` rounds are kept; a turn with fewer is not cut.

The summary of whole turns is the first text block of the first kept user message (or
its own user message before an assistant one), headed by :data:`SUMMARY_HEADER` and
ended by a marker line: only a marked block is compaction's own, and a user's text in
summary form is never replaced (:mod:`memlife.online.compaction_summary`). The summariser
reads at most ``summarizer_input_tokens`` a call, the summary so far included: a longer
head goes in chunks cut only before an assistant message, each a valid history (the
summary so far, a user message, opens the next; no tool call parted from its results). A
summary so far that leaves no room is condensed first; one that still leaves none is a
summariser failure. A message, or a tool call with its results, larger than the bound by
itself is shortened for the summariser only: long texts cut to head and tail around a
placeholder saying how much was left out, ids and tool pairing kept; the kept history is
never touched. A summariser failure changes nothing and is reported in
:class:`CompactionResult`. A count that is not a whole number (an int of at least 0; a
float, even 12.0, a bool or a string is not) is ``counter_failed``, and so is a counter
whose counts in one call are not all exact or all estimated (``last_estimated``). Shapes
are checked before anything is counted (:mod:`memlife.online.history`).
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import anthropic

from memlife.errors import InputError, MemlifeError
from memlife.errors import SummarizerError as SummarizerError  # moved; re-exported
from memlife.online.compaction_cuts import first_fitting, round_cuts, round_start
from memlife.online.compaction_summary import (
    NoRoom,
    after_task,
    anthropic_client,
    merge_summary,
    summarise_in_chunks,
    transcript_prompt,
)
from memlife.online.history import (
    DEFAULT_MODEL,
    SUMMARY_HEADER,
    AnthropicTokenCounter,
    EstimateTokenCounter,
    Message,
    TokenCounter,
    check_turn_starts,
    derive_turn_starts,
    plain_messages,
    render_transcript,
    validate_history,
)
from memlife.online.inputs import shown

__all__ = [
    "DEFAULT_MODEL",
    "SUMMARY_HEADER",
    "AnthropicSummarizer",
    "AnthropicTokenCounter",
    "CompactionResult",
    "Conversation",
    "EstimateTokenCounter",
    "Message",
    "Summarizer",
    "SummarizerError",
    "TokenCounter",
    "compact",
    "derive_turn_starts",
    "render_transcript",
    "validate_history",
]

SUMMARIZER_INPUT_TOKENS = 100_000  # per summariser call (estimated): the default model's
# window is 200k; half leaves room for the instructions, the summary so far and the reply


@dataclass
class Conversation:
    """Messages-API messages plus turn boundaries.

    ``turn_starts`` is None to derive turns (see :func:`derive_turn_starts`), or explicit
    indices: whole numbers, sorted, unique, starting at 0, and never at a message holding
    a ``tool_result`` (a turn cannot begin mid tool call). :func:`compact` checks them
    again against the messages as they are then.
    """

    messages: list[Message]
    turn_starts: list[int] | None = None

    def __post_init__(self) -> None:
        if self.turn_starts is not None:
            self.turn_starts = check_turn_starts(self.messages, self.turn_starts)

    def starts(self) -> list[int]:
        """Turn start indices (explicit, or derived)."""
        if self.turn_starts is not None:
            return list(self.turn_starts)
        return derive_turn_starts(self.messages)

    def turns(self) -> list[list[Message]]:
        """The messages grouped by turn, oldest first."""
        starts = self.starts()
        ends = [*starts[1:], len(self.messages)]
        return [self.messages[s:e] for s, e in zip(starts, ends, strict=True)]


@runtime_checkable
class Summarizer(Protocol):
    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """A summary of ``messages``; raise (or return "") on failure."""
        ...


_SUMMARY_SYSTEM = (
    "You compress the earlier part of a conversation between a user and an AI assistant "
    "so the assistant can continue it without the full transcript."
)
_SUMMARY_INSTRUCTIONS = (
    "Summarise the transcript below. Keep every fact, decision, preference, open task, "
    "tool call outcome (with identifiers, numbers and names exactly as written) and "
    "unresolved question the assistant may need later. Drop pleasantries and repetition. "
    "Write in the third person, as plain prose or short bullet points, and output only "
    "the summary."
)


class AnthropicSummarizer:
    """Summaries from the Anthropic Messages API (one non-streaming call per chunk).

    The older turns go to the model as a rendered transcript rather than as raw messages,
    so tool blocks need no tool definitions and the model cannot mistake them for live
    calls; each block is one entry, its later lines indented, inside an element named with
    a digest of the transcript, so no text in it speaks as another speaker or as the
    prompt. ``max_tokens`` is the least the reply may use; a longer transcript gets one
    token of reply per 20 estimated tokens read, up to ``max_tokens_limit``. A reply cut
    off at that limit counts as a failure: a truncated summary silently loses the end of
    the history.
    """

    def __init__(
        self,
        client: anthropic.Anthropic | None = None,
        *,
        model: str = DEFAULT_MODEL,
        max_tokens: int = 1024,
        max_tokens_limit: int = 4096,
        timeout: float = 60.0,
        max_retries: int = 2,
        system: str = _SUMMARY_SYSTEM,
        instructions: str = _SUMMARY_INSTRUCTIONS,
    ) -> None:
        self._client = client
        self.model = model
        self.max_tokens = max_tokens
        self.max_tokens_limit = max(max_tokens_limit, max_tokens)
        self.timeout = timeout
        self.max_retries = max_retries
        self.system = system
        self.instructions = instructions

    def reply_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """The ``max_tokens`` a summary of ``messages`` is given."""
        read = EstimateTokenCounter().count(messages)
        return min(self.max_tokens_limit, max(self.max_tokens, read // 20))

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        if self._client is None:
            self._client = anthropic_client(self.max_retries, self.timeout)
        prompt = transcript_prompt(self.instructions, render_transcript(messages))
        max_tokens = self.reply_tokens(messages)
        reply = self._client.messages.create(
            model=self.model,
            max_tokens=max_tokens,
            system=self.system,
            messages=[{"role": "user", "content": prompt}],
            timeout=self.timeout,
        )
        if reply.stop_reason in ("max_tokens", "model_context_window_exceeded"):  # cut off
            raise SummarizerError(f"summary truncated ({reply.stop_reason}, {max_tokens=})")
        if reply.stop_reason == "refusal":
            raise SummarizerError("the model refused to summarise")
        text = "".join(b.text for b in reply.content if b.type == "text").strip()
        if not text:
            raise SummarizerError("the model returned an empty summary")
        return text


# ---- compaction ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionResult:
    """What :func:`compact` did.

    ``reason`` is one of ``compacted`` (the history now fits), ``over_budget`` (compacted,
    and at least a quarter of the excess went, but the history is still over budget),
    ``under_budget``, ``too_few_turns`` (over budget but no whole turn beyond the kept ones,
    nor more tool rounds in any turn than kept), ``counter_failed``, ``invalid_input``,
    ``summarizer_failed``, ``no_gain`` (the result was not smaller, or still over budget
    with less than a quarter of the excess gone) or ``invalid_output``. Whenever
    ``compacted`` is False, ``conversation`` is the input, untouched. ``summary`` is the
    last summary written (a call may write one for whole turns and one for tool rounds).
    """

    conversation: Conversation
    compacted: bool
    reason: str
    budget_tokens: int
    tokens_before: int | None = None
    tokens_after: int | None = None
    summary: str | None = None
    summarized_turns: int = 0
    summarized_messages: int = 0
    summarized_rounds: int = 0  # tool rounds of one kept turn (an agent loop's one turn)
    summarizer_calls: int = 0
    error: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def messages(self) -> list[Message]:
        return self.conversation.messages

    @property
    def over_budget(self) -> bool:
        """True when the returned history is still above the budget (or uncounted)."""
        return self.tokens_after is None or self.tokens_after > self.budget_tokens


class _Stop(MemlifeError):
    """Ends a compaction unchanged with a reason (a failing counter or summariser); never
    leaves this module."""

    def __init__(self, reason: str, error: str) -> None:
        super().__init__(error)
        self.reason, self.error = reason, error


def _summarise(summarizer: Summarizer, head: Sequence[Message], bound: int) -> tuple[str, int]:
    """A summary of ``head`` and the calls it took: chunks, each a valid history read
    after the summary so far, together in ``bound`` (see ``summarise_in_chunks``)."""

    def read(messages: list[Message]) -> str:
        try:
            got = summarizer.summarize(copy.deepcopy(messages))
        except Exception as exc:  # noqa: BLE001 - the contract: a failure leaves history as is
            raise _Stop(
                "summarizer_failed", f"summarizer failed: {type(exc).__name__}: {exc}"
            ) from None
        if not isinstance(got, str) or not got.strip():
            raise _Stop("summarizer_failed", "summarizer returned an empty summary")
        try:  # a lone surrogate (half an emoji) could never be sent to the API (audit 50d)
            got.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _Stop(
                "summarizer_failed", f"the summary is not valid Unicode text: {exc.reason}"
            ) from None
        return got.strip()

    try:
        return summarise_in_chunks(read, head, bound)
    except NoRoom as exc:
        raise _Stop("summarizer_failed", str(exc)) from None


def _whole_tokens(value: object) -> int | None:
    """``value`` as a token count when it is a whole number of at least 0: an int or
    another integer type (``__index__``: numpy's), never a bool, a float (12.0 too: a
    counter that answers in floats is guessing) or a string; else None."""
    if isinstance(value, bool):
        return None
    try:
        tokens = operator.index(value)  # type: ignore[arg-type]  # any object: TypeError answers
    except TypeError:
        return None
    return tokens if tokens >= 0 else None


def _whole_number(name: str, value: object, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InputError(f"{name} must be a whole number of at least {least}, not {shown(value)}")
    return value


def compact(
    conversation: Conversation | Sequence[Mapping[str, Any]],
    *,
    budget_tokens: int,
    keep_last_turns: int = 2,
    summarizer: Summarizer | None = None,
    counter: TokenCounter | None = None,
    summary_allowance: int | None = None,
    summarizer_input_tokens: int = SUMMARIZER_INPUT_TOKENS,
) -> CompactionResult:
    """Summarise older turns (then older tool rounds) when the history costs more than
    ``budget_tokens`` (see the module docstring for where it cuts).

    Keeps at least the newest ``keep_last_turns`` turns verbatim (at least 1: the current
    turn may hold a pending tool call). ``summarizer`` defaults to
    :class:`AnthropicSummarizer` (only called when a summary is needed); ``counter`` to
    :class:`EstimateTokenCounter`, which costs no API call. ``summary_allowance`` is the
    room (tokens) a cut leaves for the summary. A malformed message or explicit turn start
    is an InputError (before anything is counted); nothing is raised for a failing
    summariser or counter: the result says what happened. The input is never mutated.
    """
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 0:
        raise InputError(
            f"budget_tokens must be a whole number of tokens, not {shown(budget_tokens)}"
        )
    keep = _whole_number("keep_last_turns", keep_last_turns, 1)
    bound = _whole_number("summarizer_input_tokens", summarizer_input_tokens, 1)
    _whole_number("summary_allowance", 0 if summary_allowance is None else summary_allowance, 0)
    # shapes and explicit turn starts first: a malformed message must not count as nothing
    given = conversation.messages if isinstance(conversation, Conversation) else conversation
    explicit = conversation.turn_starts if isinstance(conversation, Conversation) else None
    plain = plain_messages(given)
    starts_now = check_turn_starts(plain, explicit) if explicit is not None else None
    if isinstance(conversation, Conversation) and plain == conversation.messages:
        conv = conversation  # as given: an unchanged result returns this very object
    else:
        conv = Conversation(plain, starts_now)  # SDK block objects as dicts
    counter = counter or EstimateTokenCounter()

    def unchanged(reason: str, **kw: Any) -> CompactionResult:
        return CompactionResult(
            conversation=conv, compacted=False, reason=reason, budget_tokens=budget_tokens, **kw
        )

    problems = validate_history(conv.messages, allow_pending_tool_use=True)
    if problems:
        return unchanged(
            "invalid_input",
            error="input history is not a valid Messages API history",
            problems=problems,
        )

    kinds: set[bool] = set()  # whether each count was an estimate (AnthropicTokenCounter)

    def count(messages: Sequence[Mapping[str, Any]]) -> int:
        try:
            got = counter.count(messages)
        except Exception as exc:  # noqa: BLE001 - any counter failure means "do not touch"
            raise _Stop(
                "counter_failed", f"token counting failed: {type(exc).__name__}: {exc}"
            ) from None
        # a counter that fell back to its estimate part way (a 429 from count_tokens) would
        # have cuts and the fit judged on another scale than ``before`` (audit 50d)
        kinds.add(getattr(counter, "last_estimated", None) is True)
        if len(kinds) > 1:
            why = getattr(counter, "last_error", None)
            raise _Stop(
                "counter_failed",
                "token counting fell back to an estimate part way"
                + (f" ({why})" if why else "")
                + ": exact and estimated counts cannot be compared",
            )
        tokens = _whole_tokens(got)
        if tokens is None:  # -5, "100000", 12.0: a count is an int of at least 0
            shown = f" ({got})" if isinstance(got, int | float) else ""
            raise _Stop(
                "counter_failed",
                f"token counting failed: the counter returned a {type(got).__name__}{shown}, "
                "not a whole number of tokens (an int of at least 0)",
            )
        return tokens

    try:
        before = count(conv.messages)
    except _Stop as stop:
        return unchanged(stop.reason, error=stop.error)
    if before <= budget_tokens:
        return unchanged("under_budget", tokens_before=before, tokens_after=before)
    summarizer = summarizer or AnthropicSummarizer()
    if summary_allowance is None:
        reply = getattr(summarizer, "max_tokens", None)
        reply = reply if isinstance(reply, int) and not isinstance(reply, bool) else 1024
        summary_allowance = min(max(reply, 0), budget_tokens // 8)
    allowance = summary_allowance
    try:
        return _compact(conv, before, budget_tokens, keep, allowance, bound, summarizer, count)
    except _Stop as stop:
        error = stop.error or None
        return unchanged(stop.reason, error=error, tokens_before=before, tokens_after=before)


def _compact(
    conv: Conversation,
    before: int,
    budget: int,
    keep: int,
    allowance: int,
    bound: int,
    summarizer: Summarizer,
    count: Callable[[Sequence[Mapping[str, Any]]], int],
) -> CompactionResult:
    msgs = conv.messages
    starts = conv.starts()
    cur, after = msgs, before
    new_starts = None if conv.turn_starts is None else list(conv.turn_starts)
    summary, calls, turns, removed, rounds, merged = "", 0, 0, 0, 0, False

    # 1. whole turns: the earliest cut (most kept) whose kept part and summary fit
    cands = starts[1 : max(1, len(starts) - keep + 1)]  # keep past the history: none
    if cands:
        fit = first_fitting(cands, lambda c: count(msgs[c:]) + allowance <= budget)
        # the fitting cut; then the farthest, should the summary overrun its allowance
        for cut in dict.fromkeys((fit, cands[-1])):
            summary, n = _summarise(summarizer, msgs[:cut], bound)
            calls += n
            cur, merged = merge_summary(copy.deepcopy(msgs[cut:]), summary)
            after = count(cur)
            if after <= budget:
                break
        turns, removed = starts.index(cut), cut
        if new_starts is not None:
            shift = -cut if merged else 1 - cut
            new_starts = sorted({0} | {s + shift for s in new_starts if s >= cut})

    # 2. tool rounds, in the kept turn where they cost most
    if after > budget:
        cur_starts = new_starts if new_starts is not None else derive_turn_starts(cur)
        ends = [*cur_starts[1:], len(cur)]
        est = EstimateTokenCounter()
        options = [
            (est.count(cur[at + 1 : cuts[-1]]), task, at, cuts)
            for task, end in zip(cur_starts, ends, strict=True)
            if (cuts := round_cuts(cur, task, end, keep, at := round_start(cur, task, end)))
        ]
        if not options and not cands:
            raise _Stop("too_few_turns", "")
        if options:
            _, task, at, cuts = max(options, key=lambda o: o[0])
            head = cur

            def fits(c: int) -> bool:
                return count([*head[: at + 1], *head[c:]]) + allowance <= budget

            # the fitting cut; then the farthest, should the summary overrun its allowance
            for cut in dict.fromkeys((first_fitting(cuts, fits), cuts[-1])):
                summary, n = _summarise(summarizer, head[task:cut], bound)
                calls += n
                request = after_task(copy.deepcopy(head[at]), summary)
                cur = [*copy.deepcopy(head[:at]), request, *copy.deepcopy(head[cut:])]
                after = count(cur)
                if after <= budget:
                    break
            gone = cut - at - 1
            rounds = sum(1 for m in head[at + 1 : cut] if m.get("role") == "assistant")
            removed += gone
            if new_starts is not None:
                new_starts = [s if s <= at else s - gone for s in new_starts]

    problems = validate_history(cur, allow_pending_tool_use=True)
    if problems:  # defensive: cannot happen for a valid input cut at a turn start
        raise _Stop(
            "invalid_output", "compaction would produce an invalid history; " + "; ".join(problems)
        )
    if after >= before:
        raise _Stop("no_gain", f"summary did not shrink the history ({after} >= {before} tokens)")
    if after > budget and (before - after) * 4 < before - budget:
        raise _Stop(
            "no_gain",
            f"compaction would leave the history over budget ({after} > {budget} tokens), "
            f"removing {before - after} of the {before - budget} tokens over it",
        )
    return CompactionResult(
        conversation=Conversation(cur, new_starts),
        compacted=True,
        reason="compacted" if after <= budget else "over_budget",
        budget_tokens=budget,
        tokens_after=after,
        summarized_turns=turns,
        summarized_messages=removed,
        summarized_rounds=rounds,
        tokens_before=before,
        summary=summary,
        summarizer_calls=calls,
    )
