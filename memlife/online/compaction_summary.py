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

The bound holds for every call, the summary so far included (estimated tokens, the
counter the chunks are cut with): a chunk takes units (the first message, or an assistant
message and the user message after it) while they fit in three quarters of the bound and
in what the summary so far leaves of it. When the summary so far leaves no room for the
next unit, it is condensed first, in a call that reads only it; when it still leaves none
(or is itself longer than the bound) the summary stops with :class:`NoRoom` and
compaction changes nothing. The one call over the bound reads a unit larger than the
bound by itself (a message, or a tool call with its results, cannot be split), alone
after the summary so far.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memlife.errors import SummarizerError
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


def units(head: Sequence[Message]) -> list[list[Message]]:
    """``head`` in the units a chunk is cut between: the first message, then each
    assistant message with the user message after it (its tool results, if any)."""
    out: list[list[Message]] = []
    for i, msg in enumerate(head):
        if i == 0 or msg.get("role") == "assistant":
            out.append([])
        out[-1].append(msg)
    return out


class NoRoom(SummarizerError):
    """The summary so far leaves the next call no room within the summariser's bound."""


def summarise_in_chunks(
    read: Callable[[list[Message]], str], head: Sequence[Message], bound: int
) -> tuple[str, int]:
    """A summary of ``head`` and the calls it took: ``read`` (one summariser call; a
    non-empty summary) gets each chunk after the summary so far, never more than
    ``bound`` estimated tokens but for a unit larger than that alone (see the module
    docstring). Raises :class:`NoRoom` when the summary so far leaves no room."""
    est = EstimateTokenCounter()
    todo = units(unmarked(head))
    # a unit costs no more in a chunk than alone (thinking before the chunk's last turn
    # start counts nothing), and the summary so far adds its own count: their sum bounds
    # a call's estimate
    costs = [est.count(unit) for unit in todo]
    summary, calls, i, condensed = "", 0, 0, False
    while i < len(todo):
        earlier = [so_far(summary)] if summary else []
        held = est.count(earlier)
        if held > bound:
            raise NoRoom(
                f"the summariser wrote a summary of {held} estimated tokens, more than "
                f"summarizer_input_tokens={bound}: no room left to read it with the rest"
            )
        if held + costs[i] > bound >= costs[i]:  # the summary so far crowds the next unit
            if condensed:
                raise NoRoom(
                    f"the summary so far ({held} estimated tokens, condensed once) leaves no "
                    f"room for the next messages ({costs[i]}) in "
                    f"summarizer_input_tokens={bound}"
                )
            summary, calls, condensed = read(earlier), calls + 1, True
            continue
        limit = min(bound * 3 // 4, bound - held)
        end, size = i + 1, costs[i]  # one unit at least: in bound, or too large for any
        while end < len(todo) and size + costs[end] <= limit:
            size += costs[end]
            end += 1
        chunk = [msg for unit in todo[i:end] for msg in unit]
        summary, calls, condensed, i = read([*earlier, *chunk]), calls + 1, False, end
    return summary, calls
