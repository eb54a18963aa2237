"""Short-term compaction of an agent's conversation (Messages API message lists).

When a conversation grows past a token budget, whole older turns are replaced by a model
written summary and the newest turns are kept verbatim. The result is always a history
the Messages API accepts (see :func:`validate_history`): it starts with a user message,
roles alternate, and every ``tool_use`` is answered by ``tool_result`` blocks in the very
next message. A cut is only ever made at a turn start, and a turn start never holds a
``tool_result``, so a tool call (parallel calls included) is never separated from its
results.

With no whole turn to spare (an agent loop: one request, then tool round after tool
round, all one turn), the current turn's older rounds are summarised instead: the request
stays verbatim with the summary as its last block, and the cut falls before an assistant
message that follows a message of tool results, so the round before it (its ``tool_use``
and their results) lies wholly in the summarised part. ``keep_last_turns`` then counts the
rounds kept.

A turn begins at a user message that carries no ``tool_result`` block and runs up to the
next such message. (A user message mixing tool results with text continues the current
turn: starting a turn there would orphan its results.) Callers may give explicit turn
starts instead, under the same rule.

The summary enters as the first text block of the first kept user message (or as its own
user message when the kept part starts with an assistant message), headed by
:data:`SUMMARY_HEADER`, so roles keep alternating and the kept blocks stay byte-equal.
A summariser failure (exception, empty or truncated output) changes nothing and is
reported in :class:`CompactionResult`; error text never stands in for a summary.

Why one module (over 500 lines): one algorithm, turn-safe compaction, with its two
summarisers and token counters; split up, the turn rule would be read in three places.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import anthropic

from memlife.errors import InputError
from memlife.errors import SummarizerError as SummarizerError  # moved; re-exported

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

Message = dict[str, Any]
DEFAULT_MODEL = "claude-haiku-4-5"  # summaries are cheap work; override per deployment
SUMMARY_HEADER = "[Summary of earlier conversation]"


# ---- message helpers -----------------------------------------------------------------------


def _plain_block(block: object) -> Mapping[str, Any] | None:
    """A block as a mapping: a dict as is, an SDK block object (``response.content`` of the
    Anthropic SDK: pydantic models) as its JSON form; None for anything else."""
    if isinstance(block, Mapping):
        return block
    dump = getattr(block, "model_dump", None)
    if callable(dump):
        got = dump(mode="json", exclude_none=True)
        if isinstance(got, Mapping):
            return got
    return None


def _blocks(content: object) -> list[Mapping[str, Any]]:
    """Content blocks of a message; a plain string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [pb for b in content if (pb := _plain_block(b)) is not None]
    return []


def _plain_messages(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Copies of ``messages`` with SDK block objects as dicts. A block that is neither is an
    InputError naming it: counted as nothing, it would hide tokens from the budget."""
    out: list[Message] = []
    for i, msg in enumerate(messages):
        plain = dict(msg)
        content = plain.get("content")
        if isinstance(content, list):
            blocks = []
            for j, b in enumerate(content):
                pb = _plain_block(b)
                if pb is None:
                    raise InputError(
                        f"message {i}: block {j} is a {type(b).__name__}: expected a dict or "
                        "an Anthropic SDK block (an object with model_dump())"
                    )
                blocks.append(pb)
            plain["content"] = blocks
        out.append(plain)
    return out


def _has_tool_result(message: Mapping[str, Any]) -> bool:
    return any(b.get("type") == "tool_result" for b in _blocks(message.get("content")))


def _tool_use_ids(message: Mapping[str, Any]) -> list[str]:
    return [
        str(b.get("id")) for b in _blocks(message.get("content")) if b.get("type") == "tool_use"
    ]


def _tool_result_ids(message: Mapping[str, Any]) -> list[str]:
    return [
        str(b.get("tool_use_id"))
        for b in _blocks(message.get("content"))
        if b.get("type") == "tool_result"
    ]


def _is_turn_start(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "user" and not _has_tool_result(message)


def derive_turn_starts(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices where turns begin: user messages without ``tool_result`` blocks (and 0)."""
    if not messages:
        return []
    return sorted({0} | {i for i, m in enumerate(messages) if _is_turn_start(m)})


# ---- validation ----------------------------------------------------------------------------


def validate_history(
    messages: Sequence[Mapping[str, Any]], *, allow_pending_tool_use: bool = False
) -> list[str]:
    """Problems that would make the Messages API reject ``messages``; empty when valid.

    ``allow_pending_tool_use`` accepts a final assistant message whose ``tool_use`` blocks
    are not answered yet (an agent loop between the model's call and the tool results).
    """
    problems: list[str] = []
    if not messages:
        return ["history is empty"]
    seen_use_ids: set[str] = set()
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, Mapping) else None
        if role not in ("user", "assistant"):
            problems.append(f"message {i}: role must be 'user' or 'assistant', got {role!r}")
            continue
        content = msg.get("content")
        if not isinstance(content, str | list):
            problems.append(f"message {i}: content must be a string or a list of blocks")
            continue
        if not content or (isinstance(content, str) and not content.strip()):
            problems.append(f"message {i}: content is empty")
        if isinstance(content, list) and any(
            (pb := _plain_block(b)) is None or not isinstance(pb.get("type"), str) for b in content
        ):
            problems.append(f"message {i}: every content block needs a 'type'")
        for j, b in enumerate(_blocks(content) if isinstance(content, list) else []):
            text = b.get("text")
            if b.get("type") == "text" and (not isinstance(text, str) or not text.strip()):
                problems.append(f"message {i}: block {j}: a text block needs non-blank text")
            for key in {"tool_use": ("id",), "tool_result": ("tool_use_id",)}.get(
                str(b.get("type")), ()
            ):
                if not isinstance(b.get(key), str) or not b.get(key):
                    # compared as text below: None must not answer "None", nor 1 answer "1"
                    problems.append(f"message {i}: block {j}: {key} must be a non-empty string")
        if i == 0 and role != "user":
            problems.append("message 0: the first message must have role 'user'")
        if i > 0 and isinstance(messages[i - 1], Mapping) and messages[i - 1].get("role") == role:
            problems.append(f"message {i}: role {role!r} repeats; roles must alternate")

        uses = _tool_use_ids(msg)
        results = _tool_result_ids(msg)
        if uses and role != "assistant":
            problems.append(f"message {i}: tool_use blocks only belong in assistant messages")
        for use_id in uses:
            if use_id in seen_use_ids:
                problems.append(f"message {i}: duplicate tool_use id {use_id}")
            seen_use_ids.add(use_id)
        if results:
            if role != "user":
                problems.append(f"message {i}: tool_result blocks only belong in user messages")
            kinds = [b.get("type") for b in _blocks(content)]
            if kinds[: len(results)] != ["tool_result"] * len(results):
                problems.append(f"message {i}: tool_result blocks must come first")
            prev_uses = set(_tool_use_ids(messages[i - 1])) if i > 0 else set()
            for rid in results:
                if rid not in prev_uses:
                    problems.append(
                        f"message {i}: tool_result {rid} answers no tool_use in message {i - 1}"
                    )
            if len(set(results)) != len(results):
                problems.append(f"message {i}: a tool_use is answered twice")
        if uses and role == "assistant":
            if i + 1 < len(messages):
                answered = set(_tool_result_ids(messages[i + 1]))
                missing = [u for u in uses if u not in answered]
                if missing:
                    problems.append(
                        f"message {i}: tool_use {', '.join(missing)} not answered "
                        f"in message {i + 1}"
                    )
            elif not allow_pending_tool_use:
                problems.append(f"message {i}: tool_use {', '.join(uses)} is never answered")
    return problems


# ---- conversation --------------------------------------------------------------------------


@dataclass
class Conversation:
    """Messages-API messages plus turn boundaries.

    ``turn_starts`` is None to derive turns (see :func:`derive_turn_starts`), or explicit
    indices: sorted, unique, starting at 0, and never at a message holding a
    ``tool_result`` (a turn cannot begin mid tool call).
    """

    messages: list[Message]
    turn_starts: list[int] | None = None

    def __post_init__(self) -> None:
        if self.turn_starts is None:
            return
        starts = list(self.turn_starts)
        if self.messages and (not starts or starts[0] != 0):
            raise ValueError("explicit turn_starts must begin with 0")
        if starts != sorted(set(starts)):
            raise ValueError("explicit turn_starts must be sorted and unique")
        for s in starts:
            if not 0 <= s < len(self.messages):
                raise ValueError(f"turn start {s} is outside the conversation")
            if _has_tool_result(self.messages[s]):
                raise ValueError(f"turn start {s} holds a tool_result: it would split a tool call")
        self.turn_starts = starts

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


# ---- protocols and implementations ---------------------------------------------------------


@runtime_checkable
class TokenCounter(Protocol):
    def count(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Input tokens that ``messages`` would cost."""
        ...


@runtime_checkable
class Summarizer(Protocol):
    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """A summary of ``messages``; raise (or return "") on failure."""
        ...


# Media blocks (top level or inside a tool_result) are read by the model as images, not as
# their base64 text: a placeholder in the transcript, and a flat token cost in the estimate
# (Anthropic: an image costs about width*height/750 tokens, at most ~1,600 once resized).
MEDIA_KINDS = ("image", "document")
MEDIA_TOKENS = 1600
# Server tool results carry opaque, encrypted or base64 fields no reader can use.
_OPAQUE_KEYS = frozenset({"encrypted_content", "encrypted_index", "signature", "data"})


def _block_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in MEDIA_KINDS:
        source = block.get("source")
        if kind == "document" and isinstance(source, Mapping) and source.get("type") == "text":
            return str(source.get("data", ""))  # a plain-text document is read as its text
        return f"[{kind}]"
    if kind == "tool_use":
        return str(block.get("name", "")) + json.dumps(block.get("input", {}), sort_keys=True)
    if kind == "tool_result":
        inner = block.get("content", "")
        if isinstance(inner, list):
            return "".join(_block_text(pb) for b in inner if (pb := _plain_block(b)) is not None)
        return str(inner)
    return json.dumps(dict(block), sort_keys=True, default=str)


def _media_count(block: Mapping[str, Any]) -> int:
    """Image and (non-text) document blocks in ``block``, tool_result contents included."""
    kind = block.get("type")
    if kind in MEDIA_KINDS:
        return 0 if _block_text(block) != f"[{kind}]" else 1
    inner = block.get("content") if kind == "tool_result" else None
    if isinstance(inner, list):
        return sum(_media_count(pb) for b in inner if (pb := _plain_block(b)) is not None)
    return 0


def _visible(value: Any) -> Any:
    """``value`` without opaque fields (encrypted content, signatures, base64 data)."""
    if isinstance(value, Mapping):
        return {k: _visible(v) for k, v in value.items() if k not in _OPAQUE_KEYS}
    if isinstance(value, list):
        return [_visible(v) for v in value]
    return value


@dataclass(frozen=True)
class EstimateTokenCounter:
    """Offline estimate: per message ``message_overhead + ceil(chars / chars_per_token)``.

    ``chars`` counts what the model reads: text; a tool call's name and compact JSON input;
    a tool result's text; any other block as its JSON. Four characters per token is
    Anthropic's rule of thumb for English prose; code, JSON and non-Latin scripts run
    denser, so keep the budget below the model's window. ``message_overhead`` stands for
    the role and framing tokens. ``system`` (if any) is counted once.
    """

    chars_per_token: float = 4.0
    message_overhead: int = 4
    system: str | None = None
    media_tokens: int = MEDIA_TOKENS  # per image or non-text document, not its base64 size

    def count(self, messages: Sequence[Mapping[str, Any]]) -> int:
        total = math.ceil(len(self.system) / self.chars_per_token) if self.system else 0
        for msg in _plain_messages(messages):  # an unreadable block: InputError, not 0
            blocks = _blocks(msg.get("content"))
            chars = sum(len(_block_text(b)) for b in blocks)
            media = sum(_media_count(b) for b in blocks)
            total += self.message_overhead + math.ceil(chars / self.chars_per_token)
            total += media * self.media_tokens
        return total


class AnthropicTokenCounter:
    """Exact counts from the Messages API's ``count_tokens`` endpoint.

    Falls back to ``fallback`` (default: an :class:`EstimateTokenCounter`) when the SDK has no
    ``count_tokens`` or the call fails (endpoint missing behind a proxy, network, quota);
    ``last_estimated`` / ``last_error`` say whether and why. ``fallback=None`` re-raises.
    """

    def __init__(
        self,
        client: anthropic.Anthropic | None = None,
        *,
        model: str = DEFAULT_MODEL,
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        timeout: float = 10.0,
        fallback: TokenCounter | Literal["estimate"] | None = "estimate",
    ) -> None:
        self._client = client
        self.model = model
        self.system = system
        self.tools = list(tools) if tools else None
        self.timeout = timeout
        self.fallback: TokenCounter | None = (
            EstimateTokenCounter(system=system) if fallback == "estimate" else fallback
        )
        self.last_estimated = False
        self.last_error: str | None = None

    def count(self, messages: Sequence[Mapping[str, Any]]) -> int:
        self.last_estimated, self.last_error = False, None
        try:
            if self._client is None:
                self._client = anthropic.Anthropic()  # lazily: needs credentials
            count_tokens = getattr(self._client.messages, "count_tokens", None)
            if count_tokens is None:
                raise AttributeError("this anthropic SDK has no messages.count_tokens")
            kwargs: dict[str, Any] = {"model": self.model, "messages": list(messages)}
            if self.system is not None:
                kwargs["system"] = self.system
            if self.tools:
                kwargs["tools"] = self.tools
            return int(count_tokens(**kwargs, timeout=self.timeout).input_tokens)
        except (anthropic.AnthropicError, AttributeError) as exc:
            if self.fallback is None:
                raise
            self.last_estimated, self.last_error = True, f"{type(exc).__name__}: {exc}"
            return self.fallback.count(messages)


def render_transcript(messages: Sequence[Mapping[str, Any]]) -> str:
    """A plain-text transcript of ``messages`` for the summariser to read."""
    lines: list[str] = []
    for msg in messages:
        speaker = "User" if msg.get("role") == "user" else "Assistant"
        for block in _blocks(msg.get("content")):
            kind = block.get("type")
            if kind == "text":
                lines.append(f"{speaker}: {block.get('text', '')}")
            elif kind == "tool_use":
                args = json.dumps(block.get("input", {}), sort_keys=True, ensure_ascii=False)
                lines.append(
                    f"Assistant called tool {block.get('name')} [{block.get('id')}]: {args}"
                )
            elif kind == "tool_result":
                status = " (error)" if block.get("is_error") else ""
                lines.append(
                    f"Tool result [{block.get('tool_use_id')}]{status}: {_block_text(block)}"
                )
            elif kind in ("thinking", "redacted_thinking"):
                continue  # private reasoning; not part of what was said or done
            elif kind == "server_tool_use":
                args = json.dumps(block.get("input", {}), sort_keys=True, ensure_ascii=False)
                lines.append(
                    f"Assistant called server tool {block.get('name')} [{block.get('id')}]: {args}"
                )
            elif isinstance(kind, str) and kind.endswith("_tool_result"):
                shown = json.dumps(_visible(block.get("content")), ensure_ascii=False)
                lines.append(f"Server tool result [{block.get('tool_use_id')}]: {shown}")
            elif kind in MEDIA_KINDS:
                lines.append(f"{speaker}: {_block_text(block)}")
            else:
                lines.append(f"{speaker}: [{kind} omitted]")
    return "\n".join(lines)


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
    """Summaries from the Anthropic Messages API (one non-streaming call per compaction).

    The older turns go to the model as a rendered transcript rather than as raw messages,
    so tool blocks need no tool definitions and the model cannot mistake them for live
    calls. A reply cut off at ``max_tokens`` counts as a failure: a truncated summary
    silently loses the end of the history.
    """

    def __init__(
        self,
        client: anthropic.Anthropic | None = None,
        *,
        model: str = DEFAULT_MODEL,
        max_tokens: int = 1024,
        timeout: float = 60.0,
        max_retries: int = 2,
        system: str = _SUMMARY_SYSTEM,
        instructions: str = _SUMMARY_INSTRUCTIONS,
    ) -> None:
        self._client = client
        self.model = model
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.max_retries = max_retries
        self.system = system
        self.instructions = instructions

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        if self._client is None:
            self._client = anthropic.Anthropic(max_retries=self.max_retries)
        prompt = (
            f"{self.instructions}\n\n<transcript>\n{render_transcript(messages)}\n</transcript>"
        )
        reply = self._client.messages.create(
            model=self.model,
            max_tokens=self.max_tokens,
            system=self.system,
            messages=[{"role": "user", "content": prompt}],
            timeout=self.timeout,
        )
        if reply.stop_reason == "max_tokens":
            raise SummarizerError(f"summary truncated at max_tokens={self.max_tokens}")
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

    ``reason`` is one of ``compacted``, ``under_budget``, ``too_few_turns`` (over budget but
    nothing older than the kept turns, nor more tool rounds in the current turn than kept), ``counter_failed``, ``invalid_input``,
    ``summarizer_failed``, ``no_gain`` (the summary was not smaller) or ``invalid_output``.
    Whenever ``compacted`` is False, ``conversation`` is the input, untouched.
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
    summarized_rounds: int = 0  # tool rounds of the current turn (an agent loop's one turn)
    error: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def messages(self) -> list[Message]:
        return self.conversation.messages

    @property
    def over_budget(self) -> bool:
        """True when the returned history is still above the budget (or uncounted)."""
        return self.tokens_after is None or self.tokens_after > self.budget_tokens


def _merge_summary(kept: list[Message], summary: str) -> tuple[list[Message], bool]:
    """Put the summary in front of ``kept``; returns (messages, merged into kept[0])."""
    text = f"{SUMMARY_HEADER}\n{summary}"
    first = kept[0]
    if first.get("role") == "user":
        # Prepend a block rather than a message: two user messages in a row would break
        # alternation, and the original blocks stay byte-equal behind it.
        merged = dict(first)
        merged["content"] = [{"type": "text", "text": text}, *_blocks(first.get("content"))]
        return [merged, *kept[1:]], True
    return [{"role": "user", "content": text}, *kept], False


def _round_cut(messages: Sequence[Mapping[str, Any]], task: int, keep: int) -> int | None:
    """Where to cut inside the current turn (from index ``task``, its request), keeping its
    last ``keep`` tool rounds: before an assistant message that follows a user message of
    tool results. The round before it (a ``tool_use`` and the results answering it) then
    lies wholly in the summarised part: no pair is split. None: too few rounds."""
    if messages[task].get("role") != "user":  # an explicit turn begun by the assistant
        return None
    cuts = [
        i for i in range(task + 2, len(messages))
        if messages[i].get("role") == "assistant" and _has_tool_result(messages[i - 1])
    ]  # fmt: skip
    return cuts[-keep] if len(cuts) >= keep else None


def _after_task(task: Message, summary: str) -> list[Message]:
    """The current request, verbatim, with the summary of its older rounds as a last block
    (a turn start holds no tool_result, so a text block may follow its blocks; the kept
    rounds begin with an assistant message: roles alternate)."""
    text = f"{SUMMARY_HEADER}\n{summary}"
    # an earlier pass's summary goes: the summariser read it with the rounds, so the new
    # one covers it (kept, each pass would add one more to the request)
    blocks = [b for b in _blocks(task.get("content")) if not _is_summary(b)]
    task["content"] = [*blocks, {"type": "text", "text": text}]
    return [task]


def _is_summary(block: Mapping[str, Any]) -> bool:
    return block.get("type") == "text" and str(block.get("text", "")).startswith(SUMMARY_HEADER)


def compact(
    conversation: Conversation | Sequence[Mapping[str, Any]],
    *,
    budget_tokens: int,
    keep_last_turns: int = 2,
    summarizer: Summarizer | None = None,
    counter: TokenCounter | None = None,
) -> CompactionResult:
    """Summarise whole older turns when the history costs more than ``budget_tokens``.

    Keeps the newest ``keep_last_turns`` turns verbatim (at least 1: the current turn may
    hold a pending tool call). ``summarizer`` defaults to :class:`AnthropicSummarizer`
    (only built when a summary is needed); ``counter`` to :class:`EstimateTokenCounter`,
    which costs no API call per turn. Nothing is ever raised for a failing summariser or
    counter; the result says what happened. The input is never mutated.
    """
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 0:
        raise InputError(f"budget_tokens must be a whole number of tokens, not {budget_tokens!r}")
    if isinstance(keep_last_turns, bool) or not isinstance(keep_last_turns, int):
        raise InputError(f"keep_last_turns must be a whole number, not {keep_last_turns!r}")
    if keep_last_turns < 1:
        raise InputError("keep_last_turns must be at least 1")
    # SDK block objects as dicts (an unreadable block is an InputError before any counting)
    if not isinstance(conversation, Conversation):
        conv = Conversation(_plain_messages(conversation))
    elif any(
        not isinstance(b, Mapping)
        for m in conversation.messages
        if isinstance(c := m.get("content"), list)
        for b in c
    ):
        conv = Conversation(_plain_messages(conversation.messages), conversation.turn_starts)
    else:
        conv = conversation  # as given: an unchanged result returns this very object
    counter = counter or EstimateTokenCounter()

    def unchanged(reason: str, **kw: Any) -> CompactionResult:
        return CompactionResult(
            conversation=conv, compacted=False, reason=reason, budget_tokens=budget_tokens, **kw
        )

    try:
        before = counter.count(conv.messages)
    except Exception as exc:  # noqa: BLE001 - any counter failure means "do not touch"
        return unchanged(
            "counter_failed", error=f"token counting failed: {type(exc).__name__}: {exc}"
        )
    if before <= budget_tokens:
        return unchanged("under_budget", tokens_before=before, tokens_after=before)

    problems = validate_history(conv.messages, allow_pending_tool_use=True)
    if problems:
        return unchanged(
            "invalid_input",
            tokens_before=before,
            tokens_after=before,
            error="input history is not a valid Messages API history",
            problems=problems,
        )

    starts = conv.starts()
    rounds = 0  # tool rounds of the current turn summarised (an agent loop: one long turn)
    if len(starts) > keep_last_turns:
        cut = starts[-keep_last_turns]
        head = copy.deepcopy(conv.messages[:cut])
    else:  # no whole turn to spare: summarise the current turn's older tool rounds
        task = starts[-1]
        round_cut = _round_cut(conv.messages, task, keep_last_turns)
        if round_cut is None:
            return unchanged("too_few_turns", tokens_before=before, tokens_after=before)
        cut = round_cut
        # the summariser reads the request with its rounds; the request itself stays verbatim
        head = copy.deepcopy(conv.messages[task:cut])
        rounds = sum(1 for m in conv.messages[task + 1 : cut] if m.get("role") == "assistant")

    try:
        summary = (summarizer or AnthropicSummarizer()).summarize(head)
    except Exception as exc:  # noqa: BLE001 - the contract: a failure leaves history as is
        return unchanged(
            "summarizer_failed",
            tokens_before=before,
            tokens_after=before,
            error=f"summarizer failed: {type(exc).__name__}: {exc}",
        )
    if not isinstance(summary, str) or not summary.strip():
        return unchanged(
            "summarizer_failed",
            tokens_before=before,
            tokens_after=before,
            error="summarizer returned an empty summary",
        )
    summary = summary.strip()

    if rounds:  # older turns and the request verbatim, the summary, the last rounds
        new_messages = copy.deepcopy(conv.messages[:task])
        new_messages += _after_task(copy.deepcopy(conv.messages[task]), summary)
        new_messages += copy.deepcopy(conv.messages[cut:])
        merged = False
    else:
        new_messages, merged = _merge_summary(copy.deepcopy(conv.messages[cut:]), summary)
    problems = validate_history(new_messages, allow_pending_tool_use=True)
    if problems:  # defensive: cannot happen for a valid input cut at a turn start
        return unchanged(
            "invalid_output",
            tokens_before=before,
            tokens_after=before,
            error="compaction would produce an invalid history",
            problems=problems,
        )
    try:
        after = counter.count(new_messages)
    except Exception as exc:  # noqa: BLE001
        return unchanged(
            "counter_failed", tokens_before=before, error=f"token counting failed: {exc}"
        )
    if after >= before:
        return unchanged(
            "no_gain",
            tokens_before=before,
            tokens_after=before,
            error=f"summary did not shrink the history ({after} >= {before} tokens)",
        )

    new_starts: list[int] | None = None
    if conv.turn_starts is not None and rounds:
        new_starts = list(conv.turn_starts)  # every turn starts where it did
    elif conv.turn_starts is not None:
        shift = -cut if merged else 1 - cut
        new_starts = sorted({0} | {s + shift for s in conv.turn_starts if s >= cut})
    return CompactionResult(
        conversation=Conversation(new_messages, new_starts),
        compacted=True,
        reason="compacted",
        budget_tokens=budget_tokens,
        tokens_before=before,
        tokens_after=after,
        summary=summary,
        summarized_turns=max(len(starts) - keep_last_turns, 0),
        summarized_messages=cut - task - 1 if rounds else cut,
        summarized_rounds=rounds,
    )
