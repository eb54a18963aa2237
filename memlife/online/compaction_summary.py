"""The summaries compaction writes, and the chunks a summariser reads (for
:mod:`memlife.online.compaction`).

Marked summaries: a summary block is ``SUMMARY_HEADER``, a newline, the summary, a newline
and a marker line, ``[memlife summary <digest>]``, where the digest is the first 16 hex
digits of a SHA-256 of the summary. Only a block with a matching marker is compaction's
own (to replace on a later pass): a user's text that merely starts with the header, a
copy of a summary the user edited, or a marker line made up by hand does not match and
stays. The summariser reads marked blocks without their marker line (still headed: the
transcript reads them as "Earlier summary:"), so it never echoes one into a new summary.

Chunks: a head longer than the summariser's bound is read in chunks that begin only at
the head's first message or at an assistant message. The message before such a cut is
a user message, whose tool results (if any) answer the assistant message before it, so
no ``tool_use`` is parted from its results; and the summary so far, a user message, then
opens the next chunk with roles alternating: each chunk is a valid history.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from memlife.online.history import (
    SUMMARY_HEADER,
    EstimateTokenCounter,
    Message,
    _blocks,
    is_summary_block,
)

_MARK = "[memlife summary {}]"


def _digest(summary: str) -> str:
    return hashlib.sha256(f"memlife summary\n{summary}".encode()).hexdigest()[:16]


def summary_text(summary: str) -> str:
    """The text of a summary block compaction writes (header, summary, marker line)."""
    return f"{SUMMARY_HEADER}\n{summary}\n{_MARK.format(_digest(summary))}"


def summary_block(summary: str) -> dict[str, str]:
    return {"type": "text", "text": summary_text(summary)}


def _own_body(text: str) -> str | None:
    """The summary inside ``text`` when compaction wrote it (its marker matches), else
    None."""
    if not text.startswith(SUMMARY_HEADER + "\n"):
        return None
    body, sep, mark = text[len(SUMMARY_HEADER) + 1 :].rpartition("\n")
    return body if sep and body and mark == _MARK.format(_digest(body)) else None


def is_own_summary(block: Mapping[str, Any]) -> bool:
    """A summary block compaction wrote (marked), not text in summary form."""
    text = block.get("text")
    return is_summary_block(block) and isinstance(text, str) and _own_body(text) is not None


def _unmarked_text(text: str) -> str:
    body = _own_body(text)
    return text if body is None else f"{SUMMARY_HEADER}\n{body}"


def unmarked(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with compaction's own summaries read without their marker line (new
    messages and blocks where one changes; the others as they are)."""
    out: list[Message] = []
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, str):
            content = _unmarked_text(content)
        elif isinstance(content, list):
            content = [
                {**b, "text": _unmarked_text(b["text"])} if is_own_summary(b) else b
                for b in _blocks(content)
            ]
        out.append({**msg, "content": content})
    return out


def so_far(summary: str) -> Message:
    """The user message that opens a later chunk: the summary so far (unmarked)."""
    return {"role": "user", "content": [{"type": "text", "text": f"{SUMMARY_HEADER}\n{summary}"}]}


def chunks(head: Sequence[Message], limit: int) -> list[list[Message]]:
    """``head`` in chunks of at most ``limit`` estimated tokens (a unit larger than that
    alone), cut only before an assistant message (see the module docstring). A unit is
    the first message, or an assistant message and the user message after it."""
    est = EstimateTokenCounter()
    units: list[list[Message]] = []
    for i, msg in enumerate(head):
        if i == 0 or msg.get("role") == "assistant":
            units.append([])
        units[-1].append(msg)
    out: list[list[Message]] = [[]]
    size = 0
    for unit in units:
        cost = est.count(unit)
        if out[-1] and size + cost > limit:
            out.append([])
            size = 0
        out[-1].extend(unit)
        size += cost
    return out
