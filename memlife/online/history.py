"""Messages API histories as compaction reads them: shape checks, validation, turns, token
counts and the transcript a summariser reads (:mod:`memlife.online.compaction` cuts them).

Shapes are checked before anything is counted (:func:`plain_messages`): a message that is
not a mapping, a role other than ``user``/``assistant``, OpenAI-style fields
(``tool_calls``, role ``tool``), content that is neither a string nor a list of blocks, a
block without a type, a non-string text, a tool input that is not a JSON object, or a
tool_result / document / search_result holding something other than blocks is an
:class:`~memlife.errors.InputError` naming "message i: block j, field f". Counted as
nothing, any of them would hide tokens from the budget.

Why one module (over 500 lines): the shape rules, the estimate and the transcript read
the same block kinds; apart, a kind added to one would be missed by the others.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import anthropic

from memlife.errors import InputError

Message = dict[str, Any]
DEFAULT_MODEL = "claude-haiku-4-5"  # summaries are cheap work; override per deployment
SUMMARY_HEADER = "[Summary of earlier conversation]"

_ROLES = ("user", "assistant")
_OPENAI_FIELDS = frozenset({"tool_calls", "tool_call_id", "function_call", "name"})


# ---- blocks --------------------------------------------------------------------------------


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


def is_summary_block(block: Mapping[str, Any]) -> bool:
    """A text block in the form compaction writes a summary in (header, newline, text)."""
    return block.get("type") == "text" and str(block.get("text", "")).startswith(
        SUMMARY_HEADER + "\n"
    )


# ---- shape checks --------------------------------------------------------------------------


def _inner_blocks(value: object, where: str, field: str) -> list[Mapping[str, Any]]:
    """A list of blocks inside a block (tool_result, document or search_result content)."""
    if not isinstance(value, list):
        raise InputError(
            f"{where}, field {field}: a {type(value).__name__}; expected a list of blocks"
        )
    return [_checked_block(b, f"{where}, {field}[{k}]") for k, b in enumerate(value)]


def _checked_block(block: object, where: str) -> Mapping[str, Any]:
    """``block`` as a mapping (SDK objects dumped), or an InputError naming what is wrong."""
    pb = _plain_block(block)
    if pb is None:
        hint = " (wrap text as {'type': 'text', 'text': ...})" if isinstance(block, str) else ""
        raise InputError(
            f"{where}: a {type(block).__name__}; expected a dict or an Anthropic SDK block "
            f"(an object with model_dump()){hint}"
        )
    kind = pb.get("type")
    if not isinstance(kind, str) or not kind:
        raise InputError(f"{where}, field type: {kind!r}; every block needs a type")
    if kind == "text" and not isinstance(pb.get("text"), str):
        raise InputError(f"{where}, field text: a {type(pb.get('text')).__name__}, not a string")
    if kind in ("tool_use", "server_tool_use"):
        if not isinstance(pb.get("name"), str):
            raise InputError(f"{where}, field name: a tool call needs a string name")
        args = pb.get("input")
        if not isinstance(args, Mapping):
            raise InputError(f"{where}, field input: a {type(args).__name__}, not a JSON object")
        try:
            json.dumps(args, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InputError(f"{where}, field input: not JSON-serialisable: {exc}") from None
    elif kind == "tool_result":
        inner = pb.get("content")
        if inner is not None and not isinstance(inner, str):
            pb = {**pb, "content": _inner_blocks(inner, where, "content")}
    elif kind == "search_result":
        pb = {**pb, "content": _inner_blocks(pb.get("content"), where, "content")}
    elif kind in MEDIA_KINDS:
        source = pb.get("source")
        if not isinstance(source, Mapping):
            raise InputError(f"{where}, field source: a {type(source).__name__}, not a mapping")
        if kind == "document" and source.get("type") == "content":
            inner = source.get("content")
            if not isinstance(inner, str):
                checked = _inner_blocks(inner, where, "source.content")
                pb = {**pb, "source": {**source, "content": checked}}
        elif kind == "document" and source.get("type") == "text":
            if not isinstance(source.get("data"), str):
                raise InputError(f"{where}, field source.data: a text document needs a string")
    return pb


def plain_messages(messages: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Shallow copies of ``messages`` with SDK block objects as dicts, after checking every
    shape the budget depends on (see the module docstring): a wrong one is an InputError
    naming message, block and field."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise InputError(f"messages: a {type(messages).__name__}; expected a list of messages")
    out: list[Message] = []
    for i, msg in enumerate(messages):
        where = f"message {i}"
        if not isinstance(msg, Mapping):
            raise InputError(
                f"{where}: a {type(msg).__name__}; expected a mapping with 'role' and 'content'"
            )
        for key in msg:
            if key not in ("role", "content"):
                hint = (
                    " (OpenAI-style tool calls: use tool_use and tool_result blocks)"
                    if key in _OPENAI_FIELDS
                    else ""
                )
                raise InputError(f"{where}: field {key}: not a Messages API message field{hint}")
        role = msg.get("role")
        if role not in _ROLES:
            hint = {
                "system": " (pass the system prompt apart from the messages)",
                "tool": " (an OpenAI-style tool message: use a tool_result block)",
            }.get(str(role), "")
            raise InputError(f"{where}: field role: {role!r} is not 'user' or 'assistant'{hint}")
        content = msg.get("content")
        plain = dict(msg)
        if isinstance(content, list):
            plain["content"] = [
                _checked_block(b, f"{where}: block {j}") for j, b in enumerate(content)
            ]
        elif not isinstance(content, str):
            raise InputError(
                f"{where}: field content: a {type(content).__name__}; expected a string "
                "or a list of blocks"
            )
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


def check_turn_starts(messages: Sequence[Mapping[str, Any]], starts: Sequence[object]) -> list[int]:
    """Explicit turn starts, checked against ``messages`` as they are now: whole numbers
    (not bools), sorted, unique, from 0, inside the list, never at a tool_result."""
    out: list[int] = []
    for s in starts:
        if isinstance(s, bool) or not isinstance(s, int):
            raise InputError(f"turn start {s!r} is not a message index (a whole number)")
        out.append(s)
    if messages and (not out or out[0] != 0):
        raise InputError("explicit turn_starts must begin with 0")
    if out != sorted(set(out)):
        raise InputError("explicit turn_starts must be sorted and unique")
    for s in out:
        if not 0 <= s < len(messages):
            raise InputError(
                f"turn start {s} is outside the conversation ({len(messages)} messages)"
            )
        if _has_tool_result(messages[s]):
            raise InputError(f"turn start {s} holds a tool_result: it would split a tool call")
    return out


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
        if role not in _ROLES:
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
            prev = messages[i - 1] if i > 0 else None
            prev_uses = set(_tool_use_ids(prev)) if isinstance(prev, Mapping) else set()
            for rid in results:
                if rid not in prev_uses:
                    problems.append(
                        f"message {i}: tool_result {rid} answers no tool_use in message {i - 1}"
                    )
            if len(set(results)) != len(results):
                problems.append(f"message {i}: a tool_use is answered twice")
        if uses and role == "assistant":
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            if isinstance(nxt, Mapping):
                answered = set(_tool_result_ids(nxt))
                missing = [u for u in uses if u not in answered]
                if missing:
                    problems.append(
                        f"message {i}: tool_use {', '.join(missing)} not answered "
                        f"in message {i + 1}"
                    )
            elif not allow_pending_tool_use or i + 1 < len(messages):
                problems.append(f"message {i}: tool_use {', '.join(uses)} is never answered")
    return problems


# ---- token counts --------------------------------------------------------------------------


@runtime_checkable
class TokenCounter(Protocol):
    def count(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Input tokens that ``messages`` would cost."""
        ...


# Media blocks (top level or inside a tool_result) are read by the model as images, not as
# their base64 text: a placeholder in the transcript, and an estimate by kind and size.
# An image: about width*height/750 tokens, at most ~1,600 once resized (Anthropic's vision
# page), so a flat 1,600. A PDF: each page is read as its text plus an image of the page
# (Anthropic's PDF page: 1,500-3,000 text tokens a page, and the page image), so
# PDF_PAGE_TOKENS a page; the pages are the PDF's "/Type /Page" objects when they can be
# read from the decoded bytes, else one page per PDF_BYTES_PER_PAGE of decoded size (a
# PDF given by URL or file id, size unknown, counts as one page).
MEDIA_KINDS = ("image", "document")
MEDIA_TOKENS = 1600
PDF_PAGE_TOKENS = 3000
PDF_BYTES_PER_PAGE = 50_000
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
# Server tool results carry opaque, encrypted or base64 fields no reader can use.
_OPAQUE_KEYS = frozenset({"encrypted_content", "encrypted_index", "signature", "data"})
_THINKING = ("thinking", "redacted_thinking")


def _json(value: object) -> str:
    """JSON as the API's tokenizer reads a tool input: compact, characters unescaped."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _document_text(block: Mapping[str, Any]) -> str | None:
    """A document the model reads as text (plain-text or content-block source), else None."""
    source = block.get("source")
    if not isinstance(source, Mapping):
        return None
    if source.get("type") == "text":
        return str(source.get("data", ""))
    if source.get("type") == "content":
        inner = source.get("content")
        if isinstance(inner, str):
            return inner
        return "\n".join(_block_text(b) for b in _blocks(inner))
    return None


def _block_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "thinking":
        return str(block.get("thinking", ""))  # the signature is not read as text
    if kind in MEDIA_KINDS:
        text = _document_text(block) if kind == "document" else None
        if text is None:
            return f"[{kind}]"
        title = block.get("title")
        return f"{title}\n{text}" if isinstance(title, str) and title else text
    if kind == "search_result":
        head = " ".join(str(block.get(k, "")) for k in ("title", "source") if block.get(k))
        return "\n".join([head, *(_block_text(b) for b in _blocks(block.get("content")))])
    if kind in ("tool_use", "server_tool_use"):
        return str(block.get("name", "")) + _json(block.get("input", {}))
    if kind == "tool_result":
        inner = block.get("content", "")
        if isinstance(inner, list):
            return "".join(_block_text(b) for b in _blocks(inner))
        return str(inner or "")
    if _server_result(kind):  # its images and PDFs cost as media (_media_tokens), not base64
        return json.dumps(_without_media(block), sort_keys=True, default=str)
    return json.dumps(dict(block), sort_keys=True, default=str)


def _server_result(kind: object) -> bool:
    """A server tool's result (``web_search_tool_result``, ``web_fetch_tool_result``...)."""
    return isinstance(kind, str) and kind.endswith("_tool_result") and kind != "tool_result"


def _nested_media(value: Any) -> list[Mapping[str, Any]]:
    """Images and documents anywhere inside ``value``: a server tool's result holds them
    nested (web_fetch returns the fetched page or PDF as a document block; audit 50d)."""
    if isinstance(value, Mapping):
        if value.get("type") in MEDIA_KINDS and isinstance(value.get("source"), Mapping):
            return [value]
        return [m for v in value.values() for m in _nested_media(v)]
    if isinstance(value, list):
        return [m for v in value for m in _nested_media(v)]
    return []


def _without_media(value: Any) -> Any:
    """``value`` with its nested images and non-text documents as their kind alone."""
    if isinstance(value, Mapping):
        if value.get("type") in MEDIA_KINDS and isinstance(value.get("source"), Mapping):
            return value if _document_text(value) is not None else {"type": value["type"]}
        return {k: _without_media(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_media(v) for v in value]
    return value


def _pdf_pages(data: str) -> int:
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        raw = b""
    pages = len(_PDF_PAGE.findall(raw))
    size = len(raw) or len(data) * 3 // 4
    return pages or max(1, math.ceil(size / PDF_BYTES_PER_PAGE))


def _media_tokens(block: Mapping[str, Any], image_tokens: int) -> int:
    """Tokens of the images and non-text documents in ``block`` (tool_result contents too)."""
    kind = block.get("type")
    if kind == "image":
        return image_tokens
    if kind == "document":
        source = block.get("source")
        if isinstance(source, Mapping) and source.get("type") == "content":
            # its text blocks are read as text; an image among them costs an image
            return sum(_media_tokens(b, image_tokens) for b in _blocks(source.get("content")))
        if _document_text(block) is not None:
            return 0
        data = source.get("data") if isinstance(source, Mapping) else None
        pages = _pdf_pages(data) if isinstance(data, str) else 1
        return pages * PDF_PAGE_TOKENS
    if _server_result(kind):
        return sum(_media_tokens(b, image_tokens) for b in _nested_media(block.get("content")))
    inner = block.get("content") if kind in ("tool_result", "search_result") else None
    return sum(_media_tokens(b, image_tokens) for b in _blocks(inner))


def _visible(value: Any) -> Any:
    """``value`` without opaque fields (encrypted content, signatures, base64 data); the
    data of a plain-text source is what the model read (a fetched page: audit 50d)."""
    if isinstance(value, Mapping):
        text = value.get("type") == "text" and isinstance(value.get("data"), str)
        return {
            k: _visible(v)
            for k, v in value.items()
            if k not in _OPAQUE_KEYS or (text and k == "data")
        }
    if isinstance(value, list):
        return [_visible(v) for v in value]
    return value


@dataclass(frozen=True)
class EstimateTokenCounter:
    """Offline estimate: per message ``message_overhead + ceil(chars / chars_per_token)``,
    plus the media estimate (see ``MEDIA_KINDS`` above).

    ``chars`` counts what the model reads: text; a tool call's name and compact JSON input
    (characters as written, not ``\\u`` escapes); a tool result's text; a text or
    content-block document and a search result as their text; any other block as its JSON.
    Thinking blocks before the last user message that holds no tool_result count nothing:
    the API strips earlier turns' thinking from the context (Anthropic, "Context windows":
    ``context_window = (input_tokens - previous_thinking_tokens) + current_turn_tokens``).
    Four characters per token is Anthropic's rule of thumb for English prose; code, JSON
    and non-Latin scripts run denser, so keep the budget below the model's window.
    ``message_overhead`` stands for the role and framing tokens. ``system`` (if any) is
    counted once. A malformed message is an InputError, never zero tokens.
    """

    chars_per_token: float = 4.0
    message_overhead: int = 4
    system: str | None = None
    media_tokens: int = MEDIA_TOKENS  # per image

    def count(self, messages: Sequence[Mapping[str, Any]]) -> int:
        plain = plain_messages(messages)
        current = max(derive_turn_starts(plain), default=0)
        total = math.ceil(len(self.system) / self.chars_per_token) if self.system else 0
        for i, msg in enumerate(plain):
            blocks = [
                b for b in _blocks(msg.get("content")) if i >= current or b.get("type") not in _THINKING
            ]  # fmt: skip
            chars = sum(len(_block_text(b)) for b in blocks)
            total += self.message_overhead + math.ceil(chars / self.chars_per_token)
            total += sum(_media_tokens(b, self.media_tokens) for b in blocks)
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
        messages = plain_messages(messages)  # a malformed message: InputError, not a 400
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


# ---- transcript ----------------------------------------------------------------------------


def _entry(line: str) -> str:
    """One entry of the transcript: its first line opens with the speaker, every other
    line (any line break a model reads as one) is indented. A message's text cannot then
    begin a line as another speaker ("Assistant: ...", "Tool result [...]: ...",
    "Earlier summary: ...") and put words in its mouth (audit 52b)."""
    return "\n  ".join(line.splitlines()) or line


def render_transcript(messages: Sequence[Mapping[str, Any]]) -> str:
    """A plain-text transcript of ``messages`` for the summariser to read. A summary block
    compaction wrote earlier reads as "Earlier summary:", not as the user's words. Each
    block is one entry: a line opening with who said or did it, then indented lines."""
    lines: list[str] = []
    for msg in messages:
        speaker = "User" if msg.get("role") == "user" else "Assistant"
        for block in _blocks(msg.get("content")):
            kind = block.get("type")
            if is_summary_block(block):
                lines.append(f"Earlier summary: {str(block['text'])[len(SUMMARY_HEADER) + 1 :]}")
            elif kind == "text":
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
            elif kind in _THINKING:
                continue  # private reasoning; not part of what was said or done
            elif kind == "server_tool_use":
                args = json.dumps(block.get("input", {}), sort_keys=True, ensure_ascii=False)
                lines.append(
                    f"Assistant called server tool {block.get('name')} [{block.get('id')}]: {args}"
                )
            elif isinstance(kind, str) and kind.endswith("_tool_result"):
                shown = json.dumps(_visible(block.get("content")), ensure_ascii=False)
                lines.append(f"Server tool result [{block.get('tool_use_id')}]: {shown}")
            elif kind == "document" and _document_text(block) is not None:
                lines.append(f"{speaker} shared a document: {_block_text(block)}")
            elif kind == "search_result":
                lines.append(f"{speaker} shared a search result: {_block_text(block)}")
            elif kind in MEDIA_KINDS:
                lines.append(f"{speaker}: {_block_text(block)}")
            else:
                lines.append(f"{speaker}: [{kind} omitted]")
    return "\n".join(map(_entry, lines))
